//! Validation: a [`GraphSpec`] becomes an indexed [`Graph`] whose structure
//! is sound, and the nodes a step needs get their ops resolved and their
//! edges type-checked.
//!
//! Owns: the error messages for duplicate names, unknown inputs, cycles
//! (structure, checked for the whole graph at create/extend time) and for
//! unknown ops, missing attrs, wrong input counts, bad output indexes and
//! dtype mismatches (semantics, checked for the nodes a step keeps, so a
//! graph may carry ops this runtime lacks in parts nobody runs). Every
//! message names the node.

use super::spec::{GraphSpec, NodeSpec};
use crate::error::{Result, Status};
use crate::ops::{self, OpDef, OpSignature, ValueType};
use std::collections::HashMap;

pub type NodeId = usize;

/// A structurally valid graph: unique names, inputs that exist, no cycles.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    nodes: Vec<GraphNode>,
    index: HashMap<String, NodeId>,
}

#[derive(Debug, Clone)]
pub struct GraphNode {
    pub spec: NodeSpec,
    /// Data inputs as (producer, output port).
    pub inputs: Vec<(NodeId, u32)>,
    pub control_inputs: Vec<NodeId>,
}

/// A node whose op is known and whose signature resolved.
#[derive(Clone)]
pub struct Resolved {
    pub def: &'static OpDef,
    pub signature: OpSignature,
}

impl Graph {
    /// Checks structure and indexes `spec`.
    pub fn build(spec: GraphSpec) -> Result<Graph> {
        let mut graph = Graph::default();
        graph.add_nodes(spec.nodes)?;
        Ok(graph)
    }

    /// A new graph with `more` nodes added; existing nodes cannot be redefined.
    pub fn extended(&self, more: GraphSpec) -> Result<Graph> {
        let mut graph = self.clone();
        graph.add_nodes(more.nodes)?;
        Ok(graph)
    }

    fn add_nodes(&mut self, specs: Vec<NodeSpec>) -> Result<()> {
        let first_new = self.nodes.len();
        for spec in specs {
            if spec.name.is_empty() {
                return Err(Status::invalid_argument(format!("a node of op '{}' has an empty name", spec.op)));
            }
            if self.index.contains_key(&spec.name) {
                return Err(Status::invalid_argument(format!("duplicate node name '{}' (op {})", spec.name, spec.op)));
            }
            self.index.insert(spec.name.clone(), self.nodes.len());
            self.nodes.push(GraphNode { spec, inputs: Vec::new(), control_inputs: Vec::new() });
        }
        for id in first_new..self.nodes.len() {
            let spec = &self.nodes[id].spec;
            let mut inputs = Vec::with_capacity(spec.inputs.len());
            for (slot, input) in spec.inputs.iter().enumerate() {
                let producer = *self.index.get(&input.node).ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "node '{}' ({}): input {slot} '{input}' names unknown node '{}'",
                        spec.name, spec.op, input.node
                    ))
                })?;
                inputs.push((producer, input.port));
            }
            let mut control_inputs = Vec::with_capacity(spec.control_inputs.len());
            for control in &spec.control_inputs {
                let producer = *self.index.get(control).ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "node '{}' ({}): control input '^{control}' names unknown node",
                        spec.name, spec.op
                    ))
                })?;
                control_inputs.push(producer);
            }
            self.nodes[id].inputs = inputs;
            self.nodes[id].control_inputs = control_inputs;
        }
        self.check_acyclic()
    }

    /// Kahn's algorithm; on failure, walks the leftover nodes to print one cycle.
    fn check_acyclic(&self) -> Result<()> {
        let order = self.topological_order();
        if order.len() == self.nodes.len() {
            return Ok(());
        }
        let mut done = vec![false; self.nodes.len()];
        for &id in &order {
            done[id] = true;
        }
        // Every leftover node has a leftover input; following them must loop.
        let start = (0..self.nodes.len()).find(|&i| !done[i]).expect("some node is left over");
        let mut seen_at = HashMap::new();
        let mut path = Vec::new();
        let mut cur = start;
        while !seen_at.contains_key(&cur) {
            seen_at.insert(cur, path.len());
            path.push(cur);
            cur = self.predecessors(cur).find(|&p| !done[p]).expect("a node on a cycle has an input on the cycle");
        }
        let mut cycle: Vec<&str> = path[seen_at[&cur]..].iter().map(|&i| self.nodes[i].spec.name.as_str()).collect();
        cycle.reverse();
        cycle.push(cycle[0]);
        Err(Status::invalid_argument(format!("graph has a cycle: {}", cycle.join(" -> "))))
    }

    /// The producers `id` waits for, without a loop's back edges: a value
    /// from a `NextIteration` belongs to the next iteration, so it orders
    /// nothing and closes no cycle.
    fn predecessors(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        let node = &self.nodes[id];
        node.inputs
            .iter()
            .map(|&(p, _)| p)
            .chain(node.control_inputs.iter().copied())
            .filter(|&p| !ops::control_flow::is_next_iteration(&self.nodes[p].spec.op))
    }

    /// Node ids in an order where every node follows its inputs (partial if
    /// there is a cycle).
    pub fn topological_order(&self) -> Vec<NodeId> {
        let mut pending: Vec<usize> = (0..self.nodes.len()).map(|i| self.predecessors(i).count()).collect();
        let mut successors: Vec<Vec<NodeId>> = vec![Vec::new(); self.nodes.len()];
        for id in 0..self.nodes.len() {
            for p in self.predecessors(id) {
                successors[p].push(id);
            }
        }
        let mut ready: Vec<NodeId> = (0..self.nodes.len()).filter(|&i| pending[i] == 0).rev().collect();
        let mut order = Vec::with_capacity(self.nodes.len());
        while let Some(id) = ready.pop() {
            order.push(id);
            for &s in successors[id].iter().rev() {
                pending[s] -= 1;
                if pending[s] == 0 {
                    ready.push(s);
                }
            }
        }
        order
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn node(&self, id: NodeId) -> &GraphNode {
        &self.nodes[id]
    }

    pub fn nodes(&self) -> &[GraphNode] {
        &self.nodes
    }

    pub fn id_of(&self, name: &str) -> Option<NodeId> {
        self.index.get(name).copied()
    }

    /// The node `name`, or NotFound naming it.
    pub fn require(&self, name: &str, role: &str) -> Result<NodeId> {
        self.id_of(name).ok_or_else(|| Status::not_found(format!("{role} '{name}' is not a node in the graph")))
    }

    /// The graph back as a spec.
    pub fn to_spec(&self) -> GraphSpec {
        GraphSpec { nodes: self.nodes.iter().map(|n| n.spec.clone()).collect() }
    }
}

/// Looks up the op of one node and resolves its signature.
pub fn resolve_node(spec: &NodeSpec) -> Result<Resolved> {
    let def = ops::lookup(&spec.op).ok_or_else(|| {
        Status::not_found(format!("node '{}': op '{}' is not registered in this runtime", spec.name, spec.op))
    })?;
    let signature = def.resolve(spec).map_err(|e| {
        if e.message.contains(&format!("'{}'", spec.name)) {
            e
        } else {
            e.context(format_args!("node '{}' ({})", spec.name, spec.op))
        }
    })?;
    if signature.inputs.len() != spec.inputs.len() {
        return Err(Status::invalid_argument(format!(
            "node '{}' ({}): expects {} data inputs, has {}",
            spec.name,
            spec.op,
            signature.inputs.len(),
            spec.inputs.len()
        )));
    }
    Ok(Resolved { def, signature })
}

/// Resolves the ops of `ids` and checks every data edge into them: the
/// output index exists and its type feeds the input's type.
pub fn resolve_nodes(graph: &Graph, ids: &[NodeId]) -> Result<HashMap<NodeId, Resolved>> {
    let mut resolved: HashMap<NodeId, Resolved> = HashMap::with_capacity(ids.len());
    for &id in ids {
        resolved.insert(id, resolve_node(&graph.node(id).spec)?);
    }
    for &id in ids {
        let node = graph.node(id);
        for (slot, &(producer, port)) in node.inputs.iter().enumerate() {
            let produced = output_type(graph, &mut resolved, producer, port)?;
            let wanted = resolved[&id].signature.inputs[slot];
            if !produced.feeds(wanted) {
                return Err(Status::invalid_argument(format!(
                    "node '{}' ({}): input {slot} expects {wanted}, but '{}:{port}' ({}) produces {produced}",
                    node.spec.name,
                    node.spec.op,
                    graph.node(producer).spec.name,
                    graph.node(producer).spec.op
                )));
            }
        }
    }
    Ok(resolved)
}

/// The type of output `port` of `producer`, resolving the producer if needed.
pub fn output_type(
    graph: &Graph,
    resolved: &mut HashMap<NodeId, Resolved>,
    producer: NodeId,
    port: u32,
) -> Result<ValueType> {
    if let std::collections::hash_map::Entry::Vacant(e) = resolved.entry(producer) {
        e.insert(resolve_node(&graph.node(producer).spec)?);
    }
    let spec = &graph.node(producer).spec;
    resolved[&producer].signature.outputs.get(port as usize).copied().ok_or_else(|| {
        Status::invalid_argument(format!(
            "output index {port} of node '{}' ({}) is out of range: it has {} outputs",
            spec.name,
            spec.op,
            resolved[&producer].signature.outputs.len()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::{AttrValue, DataType, TensorValue};
    use crate::tensor::{DType, Tensor};

    fn constant(name: &str, v: f32) -> NodeSpec {
        NodeSpec::new(name, "Const")
            .attr("value", AttrValue::Tensor(TensorValue::from_tensor(&Tensor::scalar(v))))
            .attr("dtype", AttrValue::Type(DataType::Tensor(DType::F32)))
    }

    fn identity(name: &str, input: &str) -> NodeSpec {
        NodeSpec::new(name, "Identity").input(input, 0).attr("T", AttrValue::Type(DataType::Tensor(DType::F32)))
    }

    fn all(graph: &Graph) -> Vec<NodeId> {
        (0..graph.len()).collect()
    }

    #[test]
    fn duplicate_names_are_rejected() {
        let err = Graph::build(GraphSpec { nodes: vec![constant("a", 1.0), constant("a", 2.0)] }).unwrap_err();
        assert_eq!(err.message, "duplicate node name 'a' (op Const)");
    }

    #[test]
    fn unknown_inputs_are_rejected() {
        let err = Graph::build(GraphSpec { nodes: vec![identity("i", "nope")] }).unwrap_err();
        assert_eq!(err.message, "node 'i' (Identity): input 0 'nope:0' names unknown node 'nope'");
        let err = Graph::build(GraphSpec { nodes: vec![constant("a", 1.0).control("ghost")] }).unwrap_err();
        assert!(err.message.contains("'^ghost'"), "{err}");
    }

    #[test]
    fn cycles_are_rejected_with_the_cycle() {
        let err = Graph::build(GraphSpec { nodes: vec![constant("c", 1.0), identity("a", "b"), identity("b", "a")] })
            .unwrap_err();
        assert!(err.message.starts_with("graph has a cycle: "), "{err}");
        assert!(err.message.contains("a -> b") || err.message.contains("b -> a"), "{err}");
    }

    #[test]
    fn a_loops_back_edge_is_no_cycle_but_other_cycles_through_a_loop_are() {
        let t = || AttrValue::Type(DataType::Tensor(DType::F32));
        let merge = |inputs: [&str; 2]| {
            NodeSpec::new("m", "Merge")
                .input(inputs[0], 0)
                .input(inputs[1], 0)
                .attr("T", t())
                .attr("N", AttrValue::Int(2))
        };
        let next = NodeSpec::new("next", "NextIteration").input("body", 0).attr("T", t());
        let body = identity("body", "m");
        let loop_ok = vec![constant("c", 1.0), merge(["c", "next"]), body.clone(), next.clone()];
        let g = Graph::build(GraphSpec { nodes: loop_ok }).unwrap();
        let order: Vec<&str> = g.topological_order().iter().map(|&i| g.node(i).spec.name.as_str()).collect();
        assert_eq!(order, ["c", "m", "body", "next"]);
        // The same shape closed by an Identity instead of a NextIteration.
        let bad = vec![constant("c", 1.0), merge(["c", "next"]), body, identity("next", "body")];
        let err = Graph::build(GraphSpec { nodes: bad }).unwrap_err();
        assert!(err.message.starts_with("graph has a cycle: "), "{err}");
    }

    #[test]
    fn unknown_op_is_rejected_when_resolved() {
        let g = Graph::build(GraphSpec { nodes: vec![NodeSpec::new("s", "SaveV9")] }).unwrap();
        let err = resolve_nodes(&g, &all(&g)).err().unwrap();
        assert_eq!(err.message, "node 's': op 'SaveV9' is not registered in this runtime");
    }

    #[test]
    fn bad_output_index_is_rejected() {
        let mut i = identity("i", "c");
        i.inputs[0].port = 3;
        let g = Graph::build(GraphSpec { nodes: vec![constant("c", 1.0), i] }).unwrap();
        let err = resolve_nodes(&g, &all(&g)).err().unwrap();
        assert_eq!(err.message, "output index 3 of node 'c' (Const) is out of range: it has 1 outputs");
    }

    #[test]
    fn dtype_mismatch_is_rejected() {
        let i = identity("i", "c").attr("T", AttrValue::Type(DataType::Tensor(DType::I32)));
        let g = Graph::build(GraphSpec { nodes: vec![constant("c", 1.0), i] }).unwrap();
        let err = resolve_nodes(&g, &all(&g)).err().unwrap();
        assert_eq!(err.message, "node 'i' (Identity): input 0 expects int32, but 'c:0' (Const) produces float32");
    }

    #[test]
    fn missing_attr_is_rejected() {
        let mut i = identity("i", "c");
        i.attrs.remove("T");
        let g = Graph::build(GraphSpec { nodes: vec![constant("c", 1.0), i] }).unwrap();
        let err = resolve_nodes(&g, &all(&g)).err().unwrap();
        assert!(err.message.contains("node 'i' (Identity)") && err.message.contains("missing attr 'T'"), "{err}");
    }

    #[test]
    fn wrong_input_count_is_rejected() {
        let i = identity("i", "c").input("c", 0);
        let g = Graph::build(GraphSpec { nodes: vec![constant("c", 1.0), i] }).unwrap();
        let err = resolve_nodes(&g, &all(&g)).err().unwrap();
        assert_eq!(err.message, "node 'i' (Identity): expects 1 data inputs, has 2");
    }

    #[test]
    fn extend_adds_but_never_redefines() {
        let g = Graph::build(GraphSpec { nodes: vec![constant("c", 1.0)] }).unwrap();
        let g2 = g.extended(GraphSpec { nodes: vec![identity("i", "c")] }).unwrap();
        assert_eq!(g2.len(), 2);
        assert!(g.extended(GraphSpec { nodes: vec![constant("c", 2.0)] }).is_err());
        assert_eq!(g.len(), 1);
    }
}
