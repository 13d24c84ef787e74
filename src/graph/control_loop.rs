//! Loops split by partitioning: every location that runs part of a loop
//! frame gets a control loop of its own, driven by the frame's `LoopCond`,
//! so its partition iterates in step with the others (TensorFlow's
//! partitioner builds the same plumbing).
//!
//! Owns: the static frame of every node of a placed graph
//! ([`FrameTable`]), the control loops added for frames that span
//! locations, and the rule that a `NextIteration` runs where its `Merge`
//! does. Must not cut edges: `partition.rs` does, and anchors each `_Recv`
//! it puts inside a frame on the control loop's `Merge` here, so the
//! receive runs once in every iteration of that location's frame instance.
//!
//! A control loop at a location, for frame F with parent G:
//!
//! ```text
//! start (Const, G = root) or G's pivot here ─▶ Enter(F) ─▶ Merge ◀── NextIteration
//!                                                            │            ▲
//!                               F's LoopCond (maybe a Recv) ─▶ Switch ─true▶ pivot (Identity)
//! ```
//!
//! Its `Merge` is live in every iteration of the frame instance, the last
//! one included; its pivot only in iterations that go on. Values crossing
//! inside the frame go once per iteration, dead ones too (the sender's
//! branch not taken, the last iteration's body), under keys that carry
//! the frame instance and iteration.

use super::spec::{AttrValue, DataType, GraphSpec, NodeSpec, TensorValue};
use super::validate::{Graph, NodeId};
use crate::error::{Result, Status};
use crate::ops::control_flow::{is_control_flow_op, is_next_iteration};
use crate::tensor::{DType, Tensor};
use std::collections::{BTreeMap, HashMap, HashSet};

/// `base`, or `base_N` for the first N that makes it a name not in
/// `taken`; the name is then taken.
pub fn unique_name(taken: &mut HashSet<String>, base: String) -> String {
    let mut name = base.clone();
    let mut n = 1;
    while !taken.insert(name.clone()) {
        name = format!("{base}_{n}");
        n += 1;
    }
    name
}

/// Index of the root frame in a [`FrameTable`].
pub const ROOT: usize = 0;

fn is_enter(op: &str) -> bool {
    matches!(op, "Enter" | "RefEnter")
}

fn is_exit(op: &str) -> bool {
    matches!(op, "Exit" | "RefExit")
}

/// The static loop frames of a graph and the frame of every node.
pub struct FrameTable {
    /// Per frame: its `frame_name` ("" for the root) and its parent.
    pub names: Vec<String>,
    pub parents: Vec<usize>,
    /// Per node: the frame it runs in.
    pub node_frame: Vec<usize>,
    /// Per node: the frame its outputs are consumed in (an `Enter`'s child,
    /// an `Exit`'s parent, else its own).
    pub out_frame: Vec<usize>,
}

impl FrameTable {
    /// Infers frames from `Enter`/`Exit` along the graph's edges, as the
    /// executor does (the executor reports inconsistent graphs; here the
    /// first input decides).
    pub fn infer(graph: &Graph) -> Result<FrameTable> {
        let mut table = FrameTable {
            names: vec![String::new()],
            parents: vec![ROOT],
            node_frame: vec![ROOT; graph.len()],
            out_frame: vec![ROOT; graph.len()],
        };
        let mut child_of: HashMap<(usize, String), usize> = HashMap::new();
        for id in graph.topological_order() {
            let node = graph.node(id);
            let frame = node
                .inputs
                .iter()
                .map(|&(p, _)| p)
                .chain(node.control_inputs.iter().copied())
                .find(|&p| !is_next_iteration(&graph.node(p).spec.op))
                .map_or(ROOT, |p| table.out_frame[p]);
            table.node_frame[id] = frame;
            let op = node.spec.op.as_str();
            table.out_frame[id] = if is_enter(op) {
                let name = node.spec.attr_str_or("frame_name", "")?;
                let next = table.names.len();
                *child_of.entry((frame, name.clone())).or_insert_with(|| {
                    table.names.push(name);
                    table.parents.push(frame);
                    next
                })
            } else if is_exit(op) {
                table.parents[frame]
            } else {
                frame
            };
        }
        Ok(table)
    }

    fn depth(&self, mut frame: usize) -> usize {
        let mut depth = 0;
        while frame != ROOT {
            frame = self.parents[frame];
            depth += 1;
        }
        depth
    }
}

/// A `NextIteration` runs where the `Merge` it feeds runs: its value
/// belongs to that location's next iteration, and only a value crossing
/// inside one iteration can be sent.
pub fn colocate_next_iterations(placed: &mut GraphSpec, location_of: &dyn Fn(&str) -> Result<String>) -> Result<()> {
    let index: HashMap<String, usize> = placed.nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect();
    let mut moves = Vec::new();
    for merge in placed.nodes.iter().filter(|n| matches!(n.op.as_str(), "Merge" | "RefMerge")) {
        for input in &merge.inputs {
            let Some(&next) = index.get(&input.node) else { continue };
            let next_node = &placed.nodes[next];
            if is_next_iteration(&next_node.op) && location_of(&next_node.device)? != location_of(&merge.device)? {
                moves.push((next, merge.device.clone()));
            }
        }
    }
    for (next, device) in moves {
        placed.nodes[next].device = device;
    }
    Ok(())
}

/// Where the control loop of one frame runs at one location.
pub struct ControlLoop {
    /// Live in every iteration: what a `_Recv` inside the frame hangs on.
    pub merge: String,
    /// Live in iterations that go on: what a nested frame's control loop
    /// enters from.
    pivot: String,
}

/// The control loops added to a graph, by (frame name path, location).
#[derive(Default)]
pub struct ControlLoops {
    by_frame: HashMap<(usize, String), ControlLoop>,
}

impl ControlLoops {
    /// The control loop of `frame` at `location`, if the frame spans
    /// locations.
    pub fn at(&self, frame: usize, location: &str) -> Option<&ControlLoop> {
        self.by_frame.get(&(frame, location.to_string()))
    }
}

/// Whether `graph` has control flow at all (values crossing locations may
/// then be dead).
pub fn has_control_flow(graph: &Graph) -> bool {
    graph.nodes().iter().any(|n| is_control_flow_op(&n.spec.op))
}

/// Adds a control loop for every frame that spans locations, at each of
/// its locations. Returns the extended graph and the loops, keyed by the
/// frame's index in the [`FrameTable`] of the *extended* graph (the same
/// indices: the added nodes only reuse existing frames).
pub fn add_control_loops(
    graph: Graph,
    locations: &[String],
    taken: &mut HashSet<String>,
) -> Result<(Graph, FrameTable, ControlLoops)> {
    let frames = FrameTable::infer(&graph)?;
    let num_frames = frames.names.len();
    if num_frames == 1 {
        return Ok((graph, frames, ControlLoops::default()));
    }
    // The locations each frame runs in, nested frames' included, and one
    // device at each.
    let mut span: Vec<BTreeMap<String, String>> = vec![BTreeMap::new(); num_frames];
    for (id, location) in locations.iter().enumerate() {
        let mut frame = frames.node_frame[id];
        while frame != ROOT {
            span[frame].entry(location.clone()).or_insert_with(|| graph.node(id).spec.device.clone());
            frame = frames.parents[frame];
        }
    }
    let mut loop_cond: Vec<Option<NodeId>> = vec![None; num_frames];
    for id in 0..graph.len() {
        if graph.node(id).spec.op == "LoopCond" {
            let frame = frames.node_frame[id];
            if let Some(other) = loop_cond[frame] {
                return Err(Status::invalid_argument(format!(
                    "loop frame '{}' has two LoopCond nodes ('{}' and '{}')",
                    frames.names[frame],
                    graph.node(other).spec.name,
                    graph.node(id).spec.name
                )));
            }
            loop_cond[frame] = Some(id);
        }
    }
    let mut order: Vec<usize> = (1..num_frames).filter(|&f| span[f].len() > 1).collect();
    if order.is_empty() {
        return Ok((graph, frames, ControlLoops::default()));
    }
    // Parents first: a nested control loop enters from its parent's pivot.
    order.sort_by_key(|&f| frames.depth(f));
    let mut unique = |base: String| unique_name(taken, base);
    let bool_t = || AttrValue::Type(DataType::Tensor(DType::Bool));
    let mut loops = ControlLoops::default();
    let mut added = GraphSpec::default();
    for frame in order {
        let cond = loop_cond[frame].ok_or_else(|| {
            Status::invalid_argument(format!(
                "loop frame '{}' spans devices or tasks but has no LoopCond to drive its other parts",
                frames.names[frame]
            ))
        })?;
        let cond_name = graph.node(cond).spec.name.clone();
        let parallel_iterations = graph
            .nodes()
            .iter()
            .enumerate()
            .filter(|(id, n)| is_enter(&n.spec.op) && frames.out_frame[*id] == frame)
            .map(|(_, n)| n.spec.attr_int_or("parallel_iterations", 10))
            .collect::<Result<Vec<i64>>>()?
            .into_iter()
            .max()
            .unwrap_or(1);
        for (location, device) in &span[frame] {
            let base = format!("_control_loop/{}", frames.names[frame]);
            let enter_input = match frames.parents[frame] {
                ROOT => {
                    let start = unique(format!("{base}/start"));
                    added.nodes.push(
                        NodeSpec::new(start.clone(), "Const")
                            .attr("value", AttrValue::Tensor(TensorValue::from_tensor(&Tensor::scalar(true))))
                            .attr("dtype", bool_t())
                            .on(device.clone()),
                    );
                    start
                }
                parent => loops
                    .at(parent, location)
                    .map(|l| l.pivot.clone())
                    .ok_or_else(|| Status::internal(format!("no control loop of frame {parent} at {location}")))?,
            };
            let enter = unique(format!("{base}/enter"));
            let merge = unique(format!("{base}/merge"));
            let switch = unique(format!("{base}/switch"));
            let pivot = unique(format!("{base}/pivot"));
            let next = unique(format!("{base}/next"));
            added.nodes.push(
                NodeSpec::new(enter.clone(), "Enter")
                    .input(enter_input, 0)
                    .attr("T", bool_t())
                    .attr("frame_name", AttrValue::Bytes(frames.names[frame].as_bytes().to_vec()))
                    .attr("is_constant", AttrValue::Bool(false))
                    .attr("parallel_iterations", AttrValue::Int(parallel_iterations))
                    .on(device.clone()),
            );
            added.nodes.push(
                NodeSpec::new(merge.clone(), "Merge")
                    .input(enter, 0)
                    .input(next.clone(), 0)
                    .attr("T", bool_t())
                    .attr("N", AttrValue::Int(2))
                    .on(device.clone()),
            );
            added.nodes.push(
                NodeSpec::new(switch.clone(), "Switch")
                    .input(merge.clone(), 0)
                    .input(cond_name.clone(), 0)
                    .attr("T", bool_t())
                    .on(device.clone()),
            );
            added
                .nodes
                .push(NodeSpec::new(pivot.clone(), "Identity").input(switch, 1).attr("T", bool_t()).on(device.clone()));
            added.nodes.push(
                NodeSpec::new(next, "NextIteration").input(pivot.clone(), 0).attr("T", bool_t()).on(device.clone()),
            );
            loops.by_frame.insert((frame, location.clone()), ControlLoop { merge, pivot });
        }
    }
    let graph = graph.extended(added)?;
    let extended = FrameTable::infer(&graph)?;
    debug_assert_eq!(extended.names, frames.names, "control loops add no frame");
    Ok((graph, extended, loops))
}
