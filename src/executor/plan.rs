//! The immutable plan of one partition, built once when the partition is
//! registered: nodes in topological order with their kernels, input slots,
//! successor edges and initial pending counts. Per step only counters and
//! slot contents change (`run.rs`).
//!
//! Owns: [`Plan`] and its construction from a partition graph. Kernels are
//! built here, once. Must not hold per-step state.
//!
//! Layout: what the run loop reads for every node lives in [`HotNode`]s
//! (32 bytes, two per cache line) and one flat edge array in topological
//! order; names, ops and non-kernel kinds stay in the cold [`PlanNode`]s,
//! read only for errors, stats and the rarer node kinds.

use super::compiled_loop::{LoopSource, compile_loops};
use super::frames::{ControlFlowPlan, EnterAttrs};
use super::rendezvous::RendezvousKey;
use crate::error::{Result, Status};
use crate::graph::partition::rendezvous_key;
use crate::graph::spec::{AttrValue, GraphSpec, NodeSpec};
use crate::graph::validate::{Graph, NodeId, Resolved, resolve_nodes};
use crate::ops::{Builtin, ComputeFn, Implementation, KernelInit, OpContext, OpKernel, ResourceMgr, Value, ValueType};
use std::collections::HashMap;

pub(crate) enum NodeKind {
    Kernel {
        kernel: Box<dyn OpKernel>,
    },
    Arg(usize),
    Retval(usize),
    Send(RendezvousKey),
    Recv(RendezvousKey),
    /// Control flow, run only by the control-flow executor
    /// (`control_flow.rs`); `is_constant` values reach every iteration.
    Enter {
        is_constant: bool,
    },
    Exit,
    NextIteration,
    Switch,
    SwitchN(usize),
    Merge,
    LoopCond,
}

impl NodeKind {
    fn is_control_flow(&self) -> bool {
        matches!(
            self,
            NodeKind::Enter { .. }
                | NodeKind::Exit
                | NodeKind::NextIteration
                | NodeKind::Switch
                | NodeKind::SwitchN(_)
                | NodeKind::Merge
                | NodeKind::LoopCond
        )
    }
}

/// Output `port` of a node feeds input slot `slot` of node `dst`; a
/// control edge has port [`CONTROL_PORT`] and no slot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutEdge {
    pub port: u32,
    pub dst: u32,
    pub slot: u32,
}

/// The port of a control edge: sorts after every data port, so a node's
/// data edges come first and the last edge of each port is found by
/// looking at the next one.
pub(crate) const CONTROL_PORT: u32 = u32::MAX;

/// What the run loop needs of a node, packed: a chain of scalar ops reads
/// one of these per node and the edges that follow it in `Plan::edges`.
#[derive(Clone, Copy)]
pub(crate) struct HotNode {
    /// The kernel's function when it is a plain [`ComputeFn`] (no state):
    /// called directly, without the kernel's box and vtable.
    pub compute: Option<ComputeFn>,
    pub input_base: u32,
    pub num_inputs: u32,
    pub num_outputs: u32,
    /// This node's out edges are `Plan::edges[first_edge..][..num_edges]`,
    /// data edges sorted by port, then control edges.
    pub first_edge: u32,
    pub num_edges: u32,
    pub flags: u8,
}

impl HotNode {
    /// Runs a kernel (else an `_Arg`, `_Retval`, `_Send` or `_Recv`).
    pub const KERNEL: u8 = 1;
    /// Some input is a bound constant (lent to the kernel, see `Plan`).
    pub const CONST_INPUTS: u8 = 2;
    /// Some input is read through a ref (`Plan::slot_deref`).
    pub const DEREF_INPUTS: u8 = 4;
    /// Worth a thread hop whatever its inputs (a kernel that says so, or
    /// one fed a large constant).
    pub const EXPENSIVE: u8 = 8;
    /// A kernel whose output 0 (a tensor) leaves through a `_Send` or a
    /// `_Retval` (`PlanNode::leaves_to`): it may be written where the
    /// reader on the other side reads it. Kernels of several outputs
    /// build output 0 first (the large one: FusedBatchNormGrad's `dx`).
    pub const OUTPUT_LEAVES: u8 = 16;

    #[inline]
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// Where node `id`'s output 0 leaves the partition, looking through up to
/// [`FORWARDS_LOOKED_THROUGH`] kernels that forward it unchanged (a frozen
/// Keras model's outputs are `Identity` nodes): to a `_Send`'s receiving
/// device, else to the caller through a `_Retval`. A send wins: the peer's
/// copy is the one a later step waits on.
fn where_output_leaves(id: usize, out_edges: &[Vec<OutEdge>], nodes: &[PlanNode]) -> Option<LeavesTo> {
    let mut frontier = vec![id];
    let mut fetched = false;
    for _ in 0..=FORWARDS_LOOKED_THROUGH {
        let mut next = Vec::new();
        for &node in &frontier {
            for edge in out_edges[node].iter().filter(|e| e.port == 0) {
                match &nodes[edge.dst as usize].kind {
                    NodeKind::Send(key) => {
                        if let Some(device) = key.dst_device() {
                            return Some(LeavesTo::Device(device.into()));
                        }
                    }
                    NodeKind::Retval(_) => fetched = true,
                    NodeKind::Kernel { kernel } if kernel.forwards_input() => next.push(edge.dst as usize),
                    _ => {}
                }
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    fetched.then_some(LeavesTo::Caller)
}

/// How many forwarding kernels in a row [`where_output_leaves`] looks through.
const FORWARDS_LOOKED_THROUGH: usize = 4;

/// The rest of a node: read for errors, stats and non-kernel kinds.
pub(crate) struct PlanNode {
    pub name: String,
    pub op: String,
    pub kind: NodeKind,
    /// For a [`HotNode::OUTPUT_LEAVES`] kernel: where its output goes.
    pub leaves_to: Option<LeavesTo>,
}

/// Where a kernel's output goes when it leaves the partition.
pub(crate) enum LeavesTo {
    /// A `_Send` to this receiving device.
    Device(Box<str>),
    /// A `_Retval`: to whoever called the step.
    Caller,
}

impl PlanNode {
    /// `node 'name' (Op)`, the prefix of every error this node raises.
    pub fn describe(&self) -> String {
        format!("node '{}' ({})", self.name, self.op)
    }
}

pub(crate) struct Plan {
    pub nodes: Vec<PlanNode>,
    /// `hot[i]` is node `nodes[i]`'s part that every step reads.
    pub hot: Vec<HotNode>,
    pub edges: Vec<OutEdge>,
    pub roots: Vec<u32>,
    /// Per input slot: read through a ref before the consumer sees it.
    pub slot_deref: Vec<bool>,
    /// Per input slot: the value of a `Const` producer, bound when the plan
    /// is built. Such edges cost a step nothing: no Const node runs, no
    /// pending count is decremented.
    pub slot_const: Vec<Option<Value>>,
    pub initial_pending: Vec<u32>,
    /// Frames and per-frame layouts when the partition has v1 control flow
    /// (then the control-flow executor runs it).
    pub control_flow: Option<ControlFlowPlan>,
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
fn constant_value(node: &PlanNode, hot: &HotNode, pending: u32) -> Result<Option<Value>> {
    let NodeKind::Kernel { kernel } = &node.kind else { return Ok(None) };
    if node.op != "Const" || hot.num_inputs != 0 || pending != 0 || hot.num_outputs != 1 {
        return Ok(None);
    }
    let mut outputs = [None];
    let resources = ResourceMgr::default();
    kernel.compute(&mut OpContext::new(&mut [], &mut outputs, &resources)).map_err(|e| e.context(node.describe()))?;
    Ok(outputs[0].take())
}

/// A count that must fit the run loop's `u32` fields.
fn count_u32(n: usize, what: &str, spec: &NodeSpec) -> Result<u32> {
    u32::try_from(n).ok().filter(|&n| n < 1 << 31).ok_or_else(|| {
        Status::invalid_argument(format!("node '{}' ({}): {n} {what} is more than a plan holds", spec.name, spec.op))
    })
}

impl Plan {
    /// Validates `graph` and builds its plan and kernels.
    pub fn build(graph: &GraphSpec) -> Result<Plan> {
        let graph = Graph::build(graph.clone())?;
        let ids: Vec<NodeId> = (0..graph.len()).collect();
        let resolved: HashMap<NodeId, Resolved> = resolve_nodes(&graph, &ids)?;

        let order = graph.topological_order();
        assert!(order.len() < (1 << 31), "node ids must leave the top bit for flags");
        let mut position = vec![0u32; graph.len()];
        for (pos, &id) in order.iter().enumerate() {
            position[id] = pos as u32;
        }

        let mut nodes = Vec::with_capacity(order.len());
        let mut hot = Vec::with_capacity(order.len());
        let mut initial_pending = Vec::with_capacity(order.len());
        // Whether a node's one output is a plain tensor: a ref's kernel may
        // allocate a variable's storage, which must not be lent memory.
        let mut first_output_tensor = Vec::with_capacity(order.len());
        let mut slot_deref = Vec::new();
        let mut enters: Vec<Option<EnterAttrs>> = Vec::with_capacity(order.len());
        for &id in &order {
            let gnode = graph.node(id);
            let spec = &gnode.spec;
            let r = &resolved[&id];
            let mut flags = 0;
            let mut compute = None;
            let kind = match r.def.implementation {
                Implementation::Kernel(_) => {
                    let kernel = r
                        .def
                        .build_kernel(&KernelInit { node: spec, signature: &r.signature })
                        .map_err(|e| e.context(format_args!("node '{}' ({})", spec.name, spec.op)))?;
                    flags |= HotNode::KERNEL;
                    if kernel.is_expensive() {
                        flags |= HotNode::EXPENSIVE;
                    }
                    compute = kernel.as_compute_fn();
                    NodeKind::Kernel { kernel }
                }
                Implementation::Builtin(Builtin::Arg) => NodeKind::Arg(index_attr(spec)?),
                Implementation::Builtin(Builtin::Retval) => NodeKind::Retval(index_attr(spec)?),
                Implementation::Builtin(Builtin::Send) => NodeKind::Send(key_of(spec)?),
                Implementation::Builtin(Builtin::Recv) => NodeKind::Recv(key_of(spec)?),
                Implementation::Builtin(Builtin::Enter) => {
                    NodeKind::Enter { is_constant: spec.attr_bool_or("is_constant", false)? }
                }
                Implementation::Builtin(Builtin::Exit) => NodeKind::Exit,
                Implementation::Builtin(Builtin::NextIteration) => NodeKind::NextIteration,
                Implementation::Builtin(Builtin::Switch) => NodeKind::Switch,
                Implementation::Builtin(Builtin::SwitchN) => NodeKind::SwitchN(r.signature.outputs.len()),
                Implementation::Builtin(Builtin::Merge) => NodeKind::Merge,
                Implementation::Builtin(Builtin::LoopCond) => NodeKind::LoopCond,
            };
            enters.push(match kind {
                NodeKind::Enter { .. } => Some(EnterAttrs {
                    frame_name: spec.attr_str_or("frame_name", "")?,
                    parallel_iterations: u32::try_from(spec.attr_int_or("parallel_iterations", 10)?.max(1))
                        .unwrap_or(u32::MAX),
                }),
                _ => None,
            });
            let input_base = count_u32(slot_deref.len(), "input slots before it", spec)?;
            for (slot, &(producer, port)) in gnode.inputs.iter().enumerate() {
                let produced = resolved[&producer].signature.outputs[port as usize];
                let wanted = r.signature.inputs[slot];
                slot_deref.push(matches!((produced, wanted), (ValueType::Ref(_), ValueType::Tensor(_))));
            }
            if slot_deref[input_base as usize..].contains(&true) {
                flags |= HotNode::DEREF_INPUTS;
            }
            hot.push(HotNode {
                compute,
                input_base,
                num_inputs: count_u32(gnode.inputs.len(), "inputs", spec)?,
                num_outputs: count_u32(r.signature.outputs.len(), "outputs", spec)?,
                first_edge: 0,
                num_edges: 0,
                flags,
            });
            initial_pending.push(count_u32(gnode.inputs.len() + gnode.control_inputs.len(), "inputs", spec)?);
            first_output_tensor.push(matches!(r.signature.outputs.first(), Some(ValueType::Tensor(_))));
            nodes.push(PlanNode { name: spec.name.clone(), op: spec.op.clone(), kind, leaves_to: None });
        }
        let mut out_edges: Vec<Vec<OutEdge>> = vec![Vec::new(); order.len()];
        for &id in &order {
            let gnode = graph.node(id);
            let dst = position[id];
            let base = hot[dst as usize].input_base;
            for (slot, &(producer, port)) in gnode.inputs.iter().enumerate() {
                out_edges[position[producer] as usize].push(OutEdge { port, dst, slot: base + slot as u32 });
            }
            for &c in &gnode.control_inputs {
                out_edges[position[c] as usize].push(OutEdge { port: CONTROL_PORT, dst, slot: u32::MAX });
            }
        }
        for id in 0..out_edges.len() {
            if !hot[id].has(HotNode::KERNEL) || !first_output_tensor[id] {
                continue;
            }
            let leaves_to = where_output_leaves(id, &out_edges, &nodes);
            if leaves_to.is_some() {
                nodes[id].leaves_to = leaves_to;
                hot[id].flags |= HotNode::OUTPUT_LEAVES;
            }
        }
        let mut slot_const: Vec<Option<Value>> = vec![None; slot_deref.len()];
        let mut skipped = vec![false; nodes.len()];
        for id in 0..nodes.len() {
            let Some(value) = constant_value(&nodes[id], &hot[id], initial_pending[id])? else { continue };
            let large = matches!(&value, Value::Tensor(t) if t.byte_len() > super::run::EXPENSIVE_INPUT_BYTES);
            // A control-flow node takes its inputs through its frame's
            // slots (a Merge fires on its first live input), so constants
            // feeding one stay nodes.
            let (data, mut control): (Vec<OutEdge>, Vec<OutEdge>) = std::mem::take(&mut out_edges[id])
                .into_iter()
                .partition(|e| e.port != CONTROL_PORT && !nodes[e.dst as usize].kind.is_control_flow());
            for edge in data {
                slot_const[edge.slot as usize] = Some(value.clone());
                initial_pending[edge.dst as usize] -= 1;
                let dst = &mut hot[edge.dst as usize];
                dst.flags |= HotNode::CONST_INPUTS;
                if large && dst.has(HotNode::KERNEL) {
                    dst.flags |= HotNode::EXPENSIVE;
                }
            }
            control.sort_by_key(|e| e.port);
            skipped[id] = control.is_empty();
            out_edges[id] = control;
        }
        // A `_Recv` marked `_dead_ok` may hand on a dead value (its sender
        // is in a branch or a loop): only the control-flow executor can.
        let has_control_flow = nodes.iter().any(|n| n.kind.is_control_flow())
            || order.iter().any(|&id| {
                let spec = &graph.node(id).spec;
                spec.op == "_Recv" && spec.attr_bool_or(crate::graph::partition::DEAD_OK_ATTR, false).unwrap_or(false)
            });
        let control_flow = if has_control_flow {
            let mut cf = ControlFlowPlan::build(&nodes, &hot, &out_edges, &initial_pending, &enters, slot_deref.len())?;
            cf.compiled = compile_loops(&LoopSource {
                nodes: &nodes,
                hot: &hot,
                out_edges: &out_edges,
                slot_const: &slot_const,
                cf: &cf,
            })?;
            Some(cf)
        } else {
            None
        };
        let mut edges = Vec::new();
        for (node, mut out) in hot.iter_mut().zip(out_edges) {
            out.sort_by_key(|e| e.port);
            node.first_edge = u32::try_from(edges.len())
                .map_err(|_| Status::invalid_argument("a partition with more than 2^32 edges"))?;
            node.num_edges = out.len() as u32;
            edges.extend(out);
        }
        let roots =
            (0..nodes.len() as u32).filter(|&i| initial_pending[i as usize] == 0 && !skipped[i as usize]).collect();
        Ok(Plan { nodes, hot, edges, roots, slot_deref, slot_const, initial_pending, control_flow })
    }

    pub fn num_slots(&self) -> usize {
        self.slot_deref.len()
    }

    /// The bound constants among a node's inputs, by input index (empty
    /// when it has none).
    #[inline]
    pub fn lent_inputs(&self, hot: &HotNode) -> &[Option<Value>] {
        if !hot.has(HotNode::CONST_INPUTS) {
            return &[];
        }
        let base = hot.input_base as usize;
        &self.slot_const[base..base + hot.num_inputs as usize]
    }
}
