//! The immutable plan of one partition, built once when the partition is
//! registered: nodes in topological order with their kernels, input slots,
//! successor edges and initial pending counts. Per step only counters and
//! slot contents change (`run.rs`).
//!
//! Owns: [`Plan`] and its construction from a partition graph. Kernels are
//! built here, once. Must not hold per-step state.

use super::rendezvous::RendezvousKey;
use crate::error::{Result, Status};
use crate::graph::partition::rendezvous_key;
use crate::graph::spec::{AttrValue, GraphSpec, NodeSpec};
use crate::graph::validate::{Graph, NodeId, Resolved, resolve_nodes};
use crate::ops::{Builtin, Implementation, KernelInit, OpContext, OpKernel, ResourceMgr, Value, ValueType};
use std::collections::HashMap;

pub(crate) enum NodeKind {
    Kernel { kernel: Box<dyn OpKernel>, expensive: bool },
    Arg(usize),
    Retval(usize),
    Send(RendezvousKey),
    Recv(RendezvousKey),
}

/// Output `port` of a node feeds input slot `slot` of node `dst`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutEdge {
    pub port: u32,
    pub dst: u32,
    pub slot: u32,
}

pub(crate) struct PlanNode {
    pub name: String,
    pub op: String,
    pub kind: NodeKind,
    pub input_base: u32,
    pub num_inputs: u32,
    pub num_outputs: u32,
    /// Sorted by port, so the last edge of each port can take the value.
    pub out_edges: Vec<OutEdge>,
    pub control_out: Vec<u32>,
    pub initial_pending: u32,
    /// Some input is a bound constant (lent to the kernel, see `Plan`).
    pub has_const_inputs: bool,
    /// Some input is read through a ref (`Plan::slot_deref`).
    pub has_deref_inputs: bool,
}

impl PlanNode {
    /// `node 'name' (Op)`, the prefix of every error this node raises.
    pub fn describe(&self) -> String {
        format!("node '{}' ({})", self.name, self.op)
    }
}

pub(crate) struct Plan {
    pub nodes: Vec<PlanNode>,
    pub roots: Vec<u32>,
    /// Per input slot: read through a ref before the consumer sees it.
    pub slot_deref: Vec<bool>,
    /// Per input slot: the value of a `Const` producer, bound when the plan
    /// is built. Such edges cost a step nothing: no Const node runs, no
    /// pending count is decremented.
    pub slot_const: Vec<Option<Value>>,
    pub initial_pending: Vec<u32>,
    /// Per node: worth a thread hop whatever its inputs (a kernel that says
    /// so, or one fed a large constant). Kept apart from `nodes` so handing
    /// out ready nodes reads one byte each.
    pub expensive: Vec<bool>,
}

fn key_of(spec: &NodeSpec) -> Result<RendezvousKey> {
    let text = |k: &str| match spec.get_attr(k) {
        Some(AttrValue::Bytes(b)) => String::from_utf8(b.clone())
            .map_err(|_| Status::invalid_argument(format!("node '{}': attr '{k}' is not UTF-8", spec.name))),
        _ => Err(Status::invalid_argument(format!("node '{}' ({}): missing attr '{k}'", spec.name, spec.op))),
    };
    let incarnation = spec.attr_int("send_device_incarnation")? as u64;
    RendezvousKey::parse(&rendezvous_key(
        &text("send_device")?,
        incarnation,
        &text("recv_device")?,
        &text("tensor_name")?,
    ))
}

fn index_attr(spec: &NodeSpec) -> Result<usize> {
    usize::try_from(spec.attr_int("index")?)
        .map_err(|_| Status::invalid_argument(format!("node '{}' ({}): negative index", spec.name, spec.op)))
}

/// The value of a `Const` node with no inputs, computed once.
fn constant_value(node: &PlanNode) -> Result<Option<Value>> {
    let NodeKind::Kernel { kernel, .. } = &node.kind else { return Ok(None) };
    if node.op != "Const" || node.num_inputs != 0 || node.initial_pending != 0 || node.num_outputs != 1 {
        return Ok(None);
    }
    let mut outputs = [None];
    let resources = ResourceMgr::default();
    kernel.compute(&mut OpContext::new(&mut [], &mut outputs, &resources)).map_err(|e| e.context(node.describe()))?;
    Ok(outputs[0].take())
}

impl Plan {
    /// Validates `graph` and builds its plan and kernels.
    pub fn build(graph: &GraphSpec) -> Result<Plan> {
        let graph = Graph::build(graph.clone())?;
        let ids: Vec<NodeId> = (0..graph.len()).collect();
        let resolved: HashMap<NodeId, Resolved> = resolve_nodes(&graph, &ids)?;

        let order = graph.topological_order();
        let mut position = vec![0u32; graph.len()];
        for (pos, &id) in order.iter().enumerate() {
            position[id] = pos as u32;
        }

        let mut nodes = Vec::with_capacity(order.len());
        let mut slot_deref = Vec::new();
        for &id in &order {
            let gnode = graph.node(id);
            let spec = &gnode.spec;
            let r = &resolved[&id];
            let kind = match r.def.implementation {
                Implementation::Kernel(build) => {
                    let kernel = build(&KernelInit { node: spec, signature: &r.signature })
                        .map_err(|e| e.context(format_args!("node '{}' ({})", spec.name, spec.op)))?;
                    let expensive = kernel.is_expensive();
                    NodeKind::Kernel { kernel, expensive }
                }
                Implementation::Builtin(Builtin::Arg) => NodeKind::Arg(index_attr(spec)?),
                Implementation::Builtin(Builtin::Retval) => NodeKind::Retval(index_attr(spec)?),
                Implementation::Builtin(Builtin::Send) => NodeKind::Send(key_of(spec)?),
                Implementation::Builtin(Builtin::Recv) => NodeKind::Recv(key_of(spec)?),
            };
            let input_base = slot_deref.len() as u32;
            for (slot, &(producer, port)) in gnode.inputs.iter().enumerate() {
                let produced = resolved[&producer].signature.outputs[port as usize];
                let wanted = r.signature.inputs[slot];
                slot_deref.push(matches!((produced, wanted), (ValueType::Ref(_), ValueType::Tensor(_))));
            }
            let has_deref_inputs = slot_deref[input_base as usize..].contains(&true);
            nodes.push(PlanNode {
                name: spec.name.clone(),
                op: spec.op.clone(),
                kind,
                input_base,
                num_inputs: gnode.inputs.len() as u32,
                num_outputs: r.signature.outputs.len() as u32,
                out_edges: Vec::new(),
                control_out: Vec::new(),
                initial_pending: (gnode.inputs.len() + gnode.control_inputs.len()) as u32,
                has_const_inputs: false,
                has_deref_inputs,
            });
        }
        for &id in &order {
            let gnode = graph.node(id);
            let dst = position[id];
            for (slot, &(producer, port)) in gnode.inputs.iter().enumerate() {
                let base = nodes[dst as usize].input_base;
                nodes[position[producer] as usize].out_edges.push(OutEdge { port, dst, slot: base + slot as u32 });
            }
            for &c in &gnode.control_inputs {
                nodes[position[c] as usize].control_out.push(dst);
            }
        }
        for node in &mut nodes {
            node.out_edges.sort_by_key(|e| e.port);
        }
        let mut slot_const: Vec<Option<Value>> = vec![None; slot_deref.len()];
        let mut skipped = vec![false; nodes.len()];
        for id in 0..nodes.len() {
            let Some(value) = constant_value(&nodes[id])? else { continue };
            let edges = std::mem::take(&mut nodes[id].out_edges);
            let large = matches!(&value, Value::Tensor(t) if t.byte_len() > super::run::EXPENSIVE_INPUT_BYTES);
            for edge in edges {
                slot_const[edge.slot as usize] = Some(value.clone());
                let dst = &mut nodes[edge.dst as usize];
                dst.initial_pending -= 1;
                dst.has_const_inputs = true;
                if let NodeKind::Kernel { expensive, .. } = &mut dst.kind {
                    *expensive |= large;
                }
            }
            skipped[id] = nodes[id].control_out.is_empty();
        }
        let roots = (0..nodes.len() as u32)
            .filter(|&i| nodes[i as usize].initial_pending == 0 && !skipped[i as usize])
            .collect();
        assert!(nodes.len() < (1 << 31), "node ids must leave the top bit for flags");
        let initial_pending = nodes.iter().map(|n| n.initial_pending).collect();
        let expensive = nodes.iter().map(|n| matches!(n.kind, NodeKind::Kernel { expensive: true, .. })).collect();
        Ok(Plan { nodes, roots, slot_deref, slot_const, initial_pending, expensive })
    }

    pub fn num_slots(&self) -> usize {
        self.slot_deref.len()
    }
}
