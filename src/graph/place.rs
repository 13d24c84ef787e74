//! Placement: every node of a client graph gets one full device name.
//!
//! Owns: the rules, which follow TensorFlow's placer where it matters:
//! - explicit requests are honoured; partial ones are completed, preferring
//!   the default task;
//! - nodes that must share a device are grouped: `_class = loc:@x`
//!   constraints, and every consumer of a ref or resource edge with the
//!   variable that produced it (so stateful ops sit with their variables);
//!   a group's requests must agree, except that a variable's reader whose
//!   own request conflicts is moved to the variable, as TensorFlow does;
//! - an unpinned source node with a single consumer goes where the consumer
//!   goes (TensorFlow's generator heuristic);
//! - anything else goes to the default device (the client's task, CPU:0).
//!
//! An unsatisfiable request is an error that lists the available devices.

use super::spec::GraphSpec;
use super::validate::{Graph, NodeId, output_type, resolve_nodes};
use crate::cluster::DeviceName;
use crate::error::{Result, Status};
use crate::ops::ValueType;
use std::collections::HashMap;

struct UnionFind(Vec<usize>);

impl UnionFind {
    fn find(&mut self, x: usize) -> usize {
        let mut root = x;
        while self.0[root] != root {
            root = self.0[root];
        }
        let mut cur = x;
        while self.0[cur] != root {
            let next = self.0[cur];
            self.0[cur] = root;
            cur = next;
        }
        root
    }

    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            self.0[ra.max(rb)] = ra.min(rb);
        }
    }
}

fn list_devices(devices: &[DeviceName]) -> String {
    devices.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
}

/// Assigns devices to every node of `graph` (already pruned), returning the
/// graph with each node's `device` set to a full device name.
pub fn place(graph: &Graph, devices: &[DeviceName], default_device: &DeviceName) -> Result<GraphSpec> {
    if devices.is_empty() {
        return Err(Status::failed_precondition("no devices to place the graph on"));
    }
    let ids: Vec<NodeId> = (0..graph.len()).collect();
    let mut resolved = resolve_nodes(graph, &ids)?;

    let mut groups = UnionFind((0..graph.len()).collect());
    let mut reads_a_variable = vec![false; graph.len()];
    for (id, reads) in reads_a_variable.iter_mut().enumerate() {
        let node = graph.node(id);
        let mut constrained = false;
        for constraint in node.spec.attr_str_list("_class") {
            if let Some(other) = constraint.strip_prefix("loc:@").and_then(|n| graph.id_of(n)) {
                groups.union(id, other);
                constrained = true;
            }
        }
        for &(producer, port) in &node.inputs {
            let ty = output_type(graph, &mut resolved, producer, port)?;
            if matches!(ty, ValueType::Ref(_) | ValueType::Resource) {
                groups.union(id, producer);
                *reads = !constrained;
            }
        }
    }

    // Merge each group's requests; remember who asked, for error messages.
    // As in TensorFlow's placer, a node reached through a ref or resource
    // edge yields to its variable: its own conflicting request is ignored
    // (`replica_device_setter` pins `v.read_value()` to the worker while
    // the variable sits on the ps). So the variables' side is merged first.
    let mut requests: HashMap<usize, (DeviceName, String)> = HashMap::new();
    let (holders, readers): (Vec<usize>, Vec<usize>) = (0..graph.len()).partition(|&id| !reads_a_variable[id]);
    for id in holders.into_iter().chain(readers) {
        let spec = &graph.node(id).spec;
        let asked = DeviceName::parse(&spec.device).map_err(|e| e.context(format_args!("node '{}'", spec.name)))?;
        if asked.is_empty() {
            continue;
        }
        let root = groups.find(id);
        match requests.get(&root) {
            None => {
                requests.insert(root, (asked, spec.name.clone()));
            }
            Some((merged, first)) => {
                let Some(both) = merged.merge(&asked) else {
                    if reads_a_variable[id] {
                        tracing::debug!(
                            "ignoring device '{}' of node '{}': it reads a variable placed on '{merged}'",
                            spec.device,
                            spec.name
                        );
                        continue;
                    }
                    return Err(Status::invalid_argument(format!(
                        "cannot colocate node '{}' (requested '{}') with node '{first}' (requested '{merged}'): \
                         they share a variable or a colocation constraint",
                        spec.name, spec.device
                    )));
                };
                let first = first.clone();
                requests.insert(root, (both, first));
            }
        }
    }

    let mut assigned: Vec<Option<usize>> = vec![None; graph.len()];
    let mut group_device: HashMap<usize, usize> = HashMap::new();
    for (&root, (request, who)) in &requests {
        let candidates: Vec<usize> = (0..devices.len()).filter(|&d| request.matches(&devices[d])).collect();
        let Some(&first) = candidates.first() else {
            return Err(Status::invalid_argument(format!(
                "Could not satisfy explicit device specification '{request}' for node '{who}': no such device. \
                 Available devices: {}",
                list_devices(devices)
            )));
        };
        let chosen = candidates.iter().copied().find(|&d| devices[d].same_task(default_device)).unwrap_or(first);
        group_device.insert(root, chosen);
    }

    let default_index = devices.iter().position(|d| default_device.matches(d)).unwrap_or(0);
    let mut consumers: Vec<Vec<NodeId>> = vec![Vec::new(); graph.len()];
    for id in 0..graph.len() {
        for &(p, _) in &graph.node(id).inputs {
            if !consumers[p].contains(&id) {
                consumers[p].push(id);
            }
        }
    }
    // Consumers before producers, so a source can follow its consumer.
    for &id in graph.topological_order().iter().rev() {
        let root = groups.find(id);
        if let Some(&d) = group_device.get(&root) {
            assigned[id] = Some(d);
            continue;
        }
        let node = graph.node(id);
        let is_source = node.inputs.is_empty() && node.control_inputs.is_empty();
        let device = match consumers[id].as_slice() {
            [only] if is_source => assigned[*only].unwrap_or(default_index),
            _ => default_index,
        };
        group_device.insert(root, device);
        assigned[id] = Some(device);
    }

    let mut placed = graph.to_spec();
    for (id, node) in placed.nodes.iter_mut().enumerate() {
        let d = assigned[id].expect("every node is visited in topological order");
        node.device = devices[d].to_string();
    }
    Ok(placed)
}
