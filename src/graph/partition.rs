//! Partitioning: a placed graph is cut into one graph per location (a
//! device, or a task when the master partitions), and every edge that
//! crosses a cut becomes a `_Send` / `_Recv` pair meeting at a rendezvous
//! key `send_device;send_incarnation;recv_device;tensor_name;0:0`.
//!
//! Owns: the cut and the Send/Recv insertion, the same code for the master
//! (by task) and for a worker's GraphMgr (by device). Control edges that
//! cross are carried by a dummy scalar sent after the source finishes.
//!
//! When the master partitions, a fed value (`_Arg`) used in another location
//! is not sent there from its fed node's location: the location gets its own
//! copy of the `_Arg`, so the feed travels with that location's RunGraph
//! instead of taking a second hop through the fed node's task. The fed node
//! itself is never run, so where its value is handed in changes no result.

use super::control_loop::{ROOT, add_control_loops, colocate_next_iterations, has_control_flow, unique_name};
use super::spec::{AttrValue, DataType, Endpoint, GraphSpec, NodeSpec, TensorValue};
use super::validate::{Graph, NodeId, Resolved, output_type, resolve_nodes};
use crate::cluster::DeviceName;
use crate::error::{Result, Status};
use crate::ops::ValueType;
use crate::tensor::{DType, Tensor};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The rendezvous key of a Send/Recv pair.
pub fn rendezvous_key(send_device: &str, send_incarnation: u64, recv_device: &str, tensor_name: &str) -> String {
    format!("{send_device};{send_incarnation:016x};{recv_device};{tensor_name};0:0")
}

/// How to partition: which location a device belongs to, and each sending
/// device's incarnation (so a restarted peer is detected).
pub struct PartitionOptions<'a> {
    pub location_of: &'a dyn Fn(&DeviceName) -> String,
    pub incarnation_of: &'a dyn Fn(&str) -> u64,
    /// Give every location that reads a fed value its own `_Arg` instead of
    /// a `_Recv` from the `_Arg`'s location. Only where the caller hands each
    /// location its feeds separately (the master, per task); a worker's
    /// partial runs deliver a feed once per task, so it keeps this off.
    pub feeds_to_consumers: bool,
}

fn key_attrs(node: NodeSpec, send_device: &str, incarnation: u64, recv_device: &str, tensor_name: &str) -> NodeSpec {
    node.attr("tensor_name", AttrValue::Bytes(tensor_name.as_bytes().to_vec()))
        .attr("send_device", AttrValue::Bytes(send_device.as_bytes().to_vec()))
        .attr("send_device_incarnation", AttrValue::Int(incarnation as i64))
        .attr("recv_device", AttrValue::Bytes(recv_device.as_bytes().to_vec()))
}

/// The attr the partitioner sets on a `_Recv` whose value may arrive dead
/// (the graph has control flow): its partition then runs in the
/// control-flow executor, which knows what to do with one.
pub const DEAD_OK_ATTR: &str = "_dead_ok";

/// Each node's location, checking that it is placed.
fn locate(graph: &Graph, opts: &PartitionOptions<'_>) -> Result<Vec<String>> {
    graph
        .nodes()
        .iter()
        .map(|node| {
            let name = DeviceName::parse(&node.spec.device)?;
            if !name.is_full() {
                return Err(Status::internal(format!(
                    "node '{}' is not placed (device '{}')",
                    node.spec.name, node.spec.device
                )));
            }
            Ok((opts.location_of)(&name))
        })
        .collect()
}

/// Splits `placed` (every node's `device` a full name) by location.
pub fn partition(placed: &GraphSpec, opts: &PartitionOptions<'_>) -> Result<BTreeMap<String, GraphSpec>> {
    let mut placed = placed.clone();
    colocate_next_iterations(&mut placed, &|device| Ok((opts.location_of)(&DeviceName::parse(device)?)))?;
    let graph = Graph::build(placed)?;
    let mut taken: HashSet<String> = graph.nodes().iter().map(|n| n.spec.name.clone()).collect();
    let locations = locate(&graph, opts)?;
    let (graph, frames, loops) = add_control_loops(graph, &locations, &mut taken)?;
    let locations = locate(&graph, opts)?;
    let device_names: Vec<String> = graph.nodes().iter().map(|n| n.spec.device.clone()).collect();
    let ids: Vec<NodeId> = (0..graph.len()).collect();
    let mut resolved: HashMap<NodeId, Resolved> = resolve_nodes(&graph, &ids)?;
    // A value crossing may be dead where the graph has control flow (or
    // received one already, when a worker splits a task's partition).
    let dead_ok = has_control_flow(&graph)
        || graph.nodes().iter().any(|n| n.spec.attr_bool_or(DEAD_OK_ATTR, false).unwrap_or(false));
    // Inside a loop frame a `_Recv` hangs on its location's control loop,
    // which runs it once per iteration.
    let anchor = |frame: usize, location: &str, recv: NodeSpec| -> Result<NodeSpec> {
        let recv = if dead_ok { recv.attr(DEAD_OK_ATTR, AttrValue::Bool(true)) } else { recv };
        if frame == ROOT {
            return Ok(recv);
        }
        let control_loop = loops.at(frame, location).ok_or_else(|| {
            Status::internal(format!(
                "'{}' receives inside loop frame '{}' at {location}, which has no control loop there",
                recv.name, frames.names[frame]
            ))
        })?;
        Ok(recv.control(control_loop.merge.clone()))
    };

    let mut unique = |base: String| unique_name(&mut taken, base);
    let mut parts: BTreeMap<String, GraphSpec> = BTreeMap::new();
    let mut edge_counter = 0usize;
    // (producer, port, destination location) → Recv node in that location.
    let mut recvs: HashMap<(NodeId, u32, String), String> = HashMap::new();
    // (producer, destination location) → Recv node carrying its control edge.
    let mut control_recvs: HashMap<(NodeId, String), String> = HashMap::new();
    let mut extra: Vec<(String, NodeSpec)> = Vec::new();
    let is_feed = |id: NodeId| opts.feeds_to_consumers && graph.node(id).spec.op == "_Arg";
    let feed_needed_at_home = feeds_needed_at_home(&graph, &locations, &is_feed);
    // (feed, location) → that location has its own copy of the `_Arg`.
    let mut feed_copies: HashSet<(NodeId, String)> = HashSet::new();

    for id in graph.topological_order() {
        let node = graph.node(id);
        let here = &locations[id];
        let mut spec = node.spec.clone();
        if is_feed(id) && !feed_needed_at_home[id] {
            continue;
        }
        for (slot, &(p, port)) in node.inputs.iter().enumerate() {
            if &locations[p] == here {
                continue;
            }
            if is_feed(p) {
                // Each copy keeps the `_Arg`'s name: a location holds at
                // most one copy, and the original only where it is used.
                if feed_copies.insert((p, here.clone())) {
                    let mut copy = graph.node(p).spec.clone();
                    copy.device = device_names[id].clone();
                    extra.push((here.clone(), copy));
                }
                continue;
            }
            let ty = output_type(&graph, &mut resolved, p, port)?;
            let dtype = match ty.deref() {
                ValueType::Tensor(d) => d,
                other => {
                    return Err(Status::invalid_argument(format!(
                        "node '{}' on {} uses '{}:{port}' ({other}) from {}: a {other} cannot cross devices; \
                         place the consumer with its variable",
                        node.spec.name,
                        device_names[id],
                        graph.node(p).spec.name,
                        device_names[p]
                    )));
                }
            };
            let recv_name = match recvs.get(&(p, port, here.clone())) {
                Some(name) => name.clone(),
                None => {
                    let src = &graph.node(p).spec.name;
                    let tensor_name = format!("edge_{edge_counter}_{src}_{port}");
                    edge_counter += 1;
                    let incarnation = (opts.incarnation_of)(&device_names[p]);
                    let send = key_attrs(
                        NodeSpec::new(unique(format!("_send/{src}_{port}/{edge_counter}")), "_Send")
                            .input(src.clone(), port)
                            .attr("T", AttrValue::Type(DataType::Tensor(dtype)))
                            .on(device_names[p].clone()),
                        &device_names[p],
                        incarnation,
                        &device_names[id],
                        &tensor_name,
                    );
                    let recv_name = unique(format!("_recv/{src}_{port}/{edge_counter}"));
                    let recv = key_attrs(
                        NodeSpec::new(recv_name.clone(), "_Recv")
                            .attr("tensor_type", AttrValue::Type(DataType::Tensor(dtype)))
                            .on(device_names[id].clone()),
                        &device_names[p],
                        incarnation,
                        &device_names[id],
                        &tensor_name,
                    );
                    let recv = anchor(frames.out_frame[p], here, recv)?;
                    extra.push((locations[p].clone(), send));
                    extra.push((here.clone(), recv));
                    recvs.insert((p, port, here.clone()), recv_name.clone());
                    recv_name
                }
            };
            spec.inputs[slot] = Endpoint::new(recv_name, 0);
        }
        for (slot, &c) in node.control_inputs.iter().enumerate() {
            if &locations[c] == here {
                continue;
            }
            let recv_name = match control_recvs.get(&(c, here.clone())) {
                Some(name) => name.clone(),
                None => {
                    let src = &graph.node(c).spec.name;
                    let tensor_name = format!("edge_{edge_counter}_{src}_control");
                    edge_counter += 1;
                    let incarnation = (opts.incarnation_of)(&device_names[c]);
                    let dummy_name = unique(format!("_control/{src}/{edge_counter}"));
                    let dummy = NodeSpec::new(dummy_name.clone(), "Const")
                        .control(src.clone())
                        .attr("value", AttrValue::Tensor(TensorValue::from_tensor(&Tensor::scalar(true))))
                        .attr("dtype", AttrValue::Type(DataType::Tensor(DType::Bool)))
                        .on(device_names[c].clone());
                    let send = key_attrs(
                        NodeSpec::new(unique(format!("_send/{src}_control/{edge_counter}")), "_Send")
                            .input(dummy_name, 0)
                            .attr("T", AttrValue::Type(DataType::Tensor(DType::Bool)))
                            .on(device_names[c].clone()),
                        &device_names[c],
                        incarnation,
                        &device_names[id],
                        &tensor_name,
                    );
                    let recv_name = unique(format!("_recv/{src}_control/{edge_counter}"));
                    let recv = key_attrs(
                        NodeSpec::new(recv_name.clone(), "_Recv")
                            .attr("tensor_type", AttrValue::Type(DataType::Tensor(DType::Bool)))
                            .on(device_names[id].clone()),
                        &device_names[c],
                        incarnation,
                        &device_names[id],
                        &tensor_name,
                    );
                    let recv = anchor(frames.out_frame[c], here, recv)?;
                    extra.push((locations[c].clone(), dummy));
                    extra.push((locations[c].clone(), send));
                    extra.push((here.clone(), recv));
                    control_recvs.insert((c, here.clone()), recv_name.clone());
                    recv_name
                }
            };
            spec.control_inputs[slot] = recv_name;
        }
        parts.entry(here.clone()).or_default().nodes.push(spec);
    }
    for (location, node) in extra {
        parts.entry(location).or_default().nodes.push(node);
    }
    Ok(parts)
}

/// For each node: a feed that must stay where it was placed, because a node
/// there reads it, a control edge leaves it (the dummy send needs the
/// original), or nothing reads it at all (so the feed still lands somewhere
/// and a missing value is still reported).
fn feeds_needed_at_home(graph: &Graph, locations: &[String], is_feed: &dyn Fn(NodeId) -> bool) -> Vec<bool> {
    let mut needed = vec![false; graph.len()];
    let mut read = vec![false; graph.len()];
    for id in 0..graph.len() {
        let node = graph.node(id);
        for &(p, _) in &node.inputs {
            read[p] = true;
            if locations[p] == locations[id] {
                needed[p] = true;
            }
        }
        for &c in &node.control_inputs {
            read[c] = true;
            needed[c] = true;
        }
    }
    (0..graph.len()).map(|id| is_feed(id) && (needed[id] || !read[id])).collect()
}
