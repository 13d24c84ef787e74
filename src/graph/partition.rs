//! Partitioning: a placed graph is cut into one graph per location (a
//! device, or a task when the master partitions), and every edge that
//! crosses a cut becomes a `_Send` / `_Recv` pair meeting at a rendezvous
//! key `send_device;send_incarnation;recv_device;tensor_name;0:0`.
//!
//! Owns: the cut and the Send/Recv insertion, the same code for the master
//! (by task) and for a worker's GraphMgr (by device). Control edges that
//! cross are carried by a dummy scalar sent after the source finishes.

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
}

fn key_attrs(node: NodeSpec, send_device: &str, incarnation: u64, recv_device: &str, tensor_name: &str) -> NodeSpec {
    node.attr("tensor_name", AttrValue::Bytes(tensor_name.as_bytes().to_vec()))
        .attr("send_device", AttrValue::Bytes(send_device.as_bytes().to_vec()))
        .attr("send_device_incarnation", AttrValue::Int(incarnation as i64))
        .attr("recv_device", AttrValue::Bytes(recv_device.as_bytes().to_vec()))
}

/// Splits `placed` (every node's `device` a full name) by location.
pub fn partition(placed: &GraphSpec, opts: &PartitionOptions<'_>) -> Result<BTreeMap<String, GraphSpec>> {
    let graph = Graph::build(placed.clone())?;
    let ids: Vec<NodeId> = (0..graph.len()).collect();
    let mut resolved: HashMap<NodeId, Resolved> = resolve_nodes(&graph, &ids)?;

    let mut device_names = Vec::with_capacity(graph.len());
    let mut locations = Vec::with_capacity(graph.len());
    for node in graph.nodes() {
        let name = DeviceName::parse(&node.spec.device)?;
        if !name.is_full() {
            return Err(Status::internal(format!(
                "node '{}' is not placed (device '{}')",
                node.spec.name, node.spec.device
            )));
        }
        locations.push((opts.location_of)(&name));
        device_names.push(node.spec.device.clone());
    }

    let mut taken: HashSet<String> = graph.nodes().iter().map(|n| n.spec.name.clone()).collect();
    let mut unique = |base: String| {
        let mut name = base.clone();
        let mut n = 1;
        while !taken.insert(name.clone()) {
            name = format!("{base}_{n}");
            n += 1;
        }
        name
    };
    let mut parts: BTreeMap<String, GraphSpec> = BTreeMap::new();
    let mut edge_counter = 0usize;
    // (producer, port, destination location) → Recv node in that location.
    let mut recvs: HashMap<(NodeId, u32, String), String> = HashMap::new();
    // (producer, destination location) → Recv node carrying its control edge.
    let mut control_recvs: HashMap<(NodeId, String), String> = HashMap::new();
    let mut extra: Vec<(String, NodeSpec)> = Vec::new();

    for id in graph.topological_order() {
        let node = graph.node(id);
        let here = &locations[id];
        let mut spec = node.spec.clone();
        for (slot, &(p, port)) in node.inputs.iter().enumerate() {
            if &locations[p] == here {
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
