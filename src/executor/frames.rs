//! The static frames of a partition with v1 control flow: which loop frame
//! every node runs in, and the per-frame layout of pending counts and input
//! slots that each iteration of that frame gets a copy of at run time.
//!
//! Owns: [`ControlFlowPlan`] and the frame inference. An `Enter` moves its
//! consumers into the child frame it names, an `Exit` moves them back to
//! the parent, every other edge stays in its frame; a node whose inputs
//! disagree is an error naming it. Must not hold per-step state: the
//! frames and iterations of a running step are `control_flow.rs`'s.

use super::plan::{CONTROL_PORT, HotNode, NodeKind, OutEdge, PlanNode};
use crate::error::{Result, Status};
use std::collections::HashMap;

/// Marks "no frame" (the root's parent) and "not an Enter".
pub(crate) const NO_FRAME: u32 = u32::MAX;

/// One loop frame of the partition (index 0 is the root frame).
pub(crate) struct StaticFrame {
    /// The `frame_name` of its `Enter`s ("" for the root), for errors and
    /// step stats.
    pub name: String,
    pub parent: u32,
    /// Pending counts of the frame's nodes at the start of an iteration,
    /// by local index. A `Merge` counts `2 × control inputs + 1`: its low
    /// bit stands for "no live data input yet".
    pub initial_pending: Vec<u32>,
    pub num_slots: u32,
    /// `Enter` nodes that feed the frame: an instance is not done before
    /// all of them delivered.
    pub num_enters: u32,
    /// The frame's `Exit` nodes: one that never delivered a live value
    /// delivers a dead one when its frame instance ends.
    pub exits: Vec<u32>,
    /// Iterations that may be in flight at once (`parallel_iterations`).
    pub parallel_iterations: u32,
}

pub(crate) struct ControlFlowPlan {
    pub frames: Vec<StaticFrame>,
    /// Per node: the frame it runs in.
    pub node_frame: Vec<u32>,
    /// Per node: its index in its frame's pending counts.
    pub local: Vec<u32>,
    /// Per input slot: its index in its consumer's frame's slots.
    pub slot_local: Vec<u32>,
    /// Per node: for an `Enter`, the frame its value enters, else [`NO_FRAME`].
    pub enter_child: Vec<u32>,
    /// Per node: its number of data inputs (a `Merge` is dead only when
    /// all of them are).
    pub num_data_inputs: Vec<u32>,
    /// Per node: for a `Merge`, whether anything reads its `value_index`.
    pub merge_index_used: Vec<bool>,
    /// Per node: what the run loop asks of it on every activation, packed.
    pub flags: Vec<u8>,
}

impl ControlFlowPlan {
    /// A `Merge`: runs on its first live input.
    pub const MERGE: u8 = 1;
    /// A `ControlTrigger`: runs even when its inputs are dead.
    pub const TRIGGER: u8 = 2;
    /// Runs under the state lock: neither waits, nor touches the
    /// rendezvous or the call frame, nor is worth a thread of its own.
    pub const LOCKED: u8 = 4;
}

/// What the frame inference needs of an `Enter`.
pub(crate) struct EnterAttrs {
    pub frame_name: String,
    pub parallel_iterations: u32,
}

impl ControlFlowPlan {
    /// Infers every node's frame. `nodes` are in topological order without
    /// back edges, `hot[i]` their run-loop records (input slots, expense),
    /// `out_edges[i]` node `i`'s out edges (constants bound to kernels
    /// already left out), `enters[i]` the attrs of an `Enter`.
    pub fn build(
        nodes: &[PlanNode],
        hot: &[HotNode],
        out_edges: &[Vec<OutEdge>],
        initial_pending: &[u32],
        enters: &[Option<EnterAttrs>],
        num_slots: usize,
    ) -> Result<ControlFlowPlan> {
        let input_base: Vec<u32> = hot.iter().map(|h| h.input_base).collect();
        let num_inputs: Vec<u32> = hot.iter().map(|h| h.num_inputs).collect();
        let expensive: Vec<bool> = hot.iter().map(|h| h.has(HotNode::EXPENSIVE)).collect();
        let n = nodes.len();
        let mut in_edges: Vec<Vec<(u32, OutEdge)>> = vec![Vec::new(); n];
        for (src, edges) in out_edges.iter().enumerate() {
            for e in edges {
                in_edges[e.dst as usize].push((src as u32, *e));
            }
        }
        let mut frames = vec![StaticFrame {
            name: String::new(),
            parent: NO_FRAME,
            initial_pending: Vec::new(),
            num_slots: 0,
            num_enters: 0,
            exits: Vec::new(),
            parallel_iterations: 1,
        }];
        let mut child_of: HashMap<(u32, String), u32> = HashMap::new();
        let mut node_frame = vec![NO_FRAME; n];
        let mut enter_child = vec![NO_FRAME; n];
        let is_next = |i: usize| matches!(nodes[i].kind, NodeKind::NextIteration);
        for id in 0..n {
            let mut frame = None;
            for &(src, _) in &in_edges[id] {
                if is_next(src as usize) {
                    continue;
                }
                let out =
                    frame_after(&nodes[src as usize], node_frame[src as usize], enter_child[src as usize], &frames)
                        .map_err(|e| e.context(nodes[id].describe()))?;
                match frame {
                    None => frame = Some(out),
                    Some(f) if f == out => {}
                    Some(f) => {
                        return Err(Status::invalid_argument(format!(
                            "{}: its inputs come from different loop frames ('{}' and '{}'); \
                             a value must enter a loop through an Enter node",
                            nodes[id].describe(),
                            frame_label(&frames, f),
                            frame_label(&frames, out)
                        )));
                    }
                }
            }
            let frame = frame.unwrap_or(0);
            node_frame[id] = frame;
            if let Some(attrs) = &enters[id] {
                let key = (frame, attrs.frame_name.clone());
                let child = *child_of.entry(key).or_insert_with(|| {
                    frames.push(StaticFrame {
                        name: attrs.frame_name.clone(),
                        parent: frame,
                        initial_pending: Vec::new(),
                        num_slots: 0,
                        num_enters: 0,
                        exits: Vec::new(),
                        parallel_iterations: 1,
                    });
                    (frames.len() - 1) as u32
                });
                let f = &mut frames[child as usize];
                f.num_enters += 1;
                f.parallel_iterations = f.parallel_iterations.max(attrs.parallel_iterations.max(1));
                enter_child[id] = child;
            }
        }
        // A back edge must stay in its frame: NextIteration and its Merge
        // run in the same loop.
        for id in 0..n {
            for &(src, _) in &in_edges[id] {
                if is_next(src as usize) && node_frame[src as usize] == 0 && node_frame[id] != 0 {
                    // Its body value came from another device: the loop was
                    // split by partitioning.
                    return Err(Status::internal(format!(
                        "{}: loop frame '{}' lost its NextIteration '{}' to the root frame: the partitioner \
                         should have given its partition a control loop for the frame",
                        nodes[id].describe(),
                        frame_label(&frames, node_frame[id]),
                        nodes[src as usize].name
                    )));
                }
                if is_next(src as usize) && node_frame[src as usize] != node_frame[id] {
                    return Err(Status::invalid_argument(format!(
                        "{}: the NextIteration '{}' feeding it runs in loop frame '{}', not in this node's '{}'",
                        nodes[id].describe(),
                        nodes[src as usize].name,
                        frame_label(&frames, node_frame[src as usize]),
                        frame_label(&frames, node_frame[id])
                    )));
                }
            }
            if matches!(nodes[id].kind, NodeKind::Exit) {
                if node_frame[id] == 0 {
                    return Err(Status::invalid_argument(format!(
                        "{}: an Exit outside any loop frame",
                        nodes[id].describe()
                    )));
                }
                frames[node_frame[id] as usize].exits.push(id as u32);
            }
            let in_loop = node_frame[id] != 0;
            if in_loop && matches!(nodes[id].kind, NodeKind::Arg(_) | NodeKind::Retval(_)) {
                return Err(Status::invalid_argument(format!(
                    "{}: a feed or fetch inside loop frame '{}' (a loop's values leave it through an Exit)",
                    nodes[id].describe(),
                    frame_label(&frames, node_frame[id])
                )));
            }
        }
        let mut local = vec![0u32; n];
        let mut slot_local = vec![0u32; num_slots];
        let mut num_data_inputs = vec![0u32; n];
        for id in 0..n {
            let frame = &mut frames[node_frame[id] as usize];
            local[id] = frame.initial_pending.len() as u32;
            let pending = if matches!(nodes[id].kind, NodeKind::Merge) {
                let controls = in_edges[id].iter().filter(|(_, e)| e.port == CONTROL_PORT).count() as u32;
                controls * 2 + 1
            } else {
                initial_pending[id]
            };
            frame.initial_pending.push(pending);
            num_data_inputs[id] = num_inputs[id];
            for s in 0..num_inputs[id] {
                slot_local[(input_base[id] + s) as usize] = frame.num_slots;
                frame.num_slots += 1;
            }
        }
        let merge_index_used = out_edges.iter().map(|edges| edges.iter().any(|e| e.port == 1)).collect();
        let flags = nodes
            .iter()
            .zip(&expensive)
            .map(|(node, &expensive)| {
                let mut f = 0;
                if matches!(node.kind, NodeKind::Merge) {
                    f |= ControlFlowPlan::MERGE;
                }
                if node.op == "ControlTrigger" {
                    f |= ControlFlowPlan::TRIGGER;
                }
                let locked = match node.kind {
                    NodeKind::Kernel { .. } => !expensive,
                    NodeKind::Arg(_) | NodeKind::Retval(_) | NodeKind::Send(_) | NodeKind::Recv(_) => false,
                    _ => true,
                };
                if locked {
                    f |= ControlFlowPlan::LOCKED;
                }
                f
            })
            .collect();
        Ok(ControlFlowPlan {
            frames,
            node_frame,
            local,
            slot_local,
            enter_child,
            num_data_inputs,
            merge_index_used,
            flags,
        })
    }
}

/// The frame a node's outputs are consumed in.
fn frame_after(node: &PlanNode, frame: u32, enter_child: u32, frames: &[StaticFrame]) -> Result<u32> {
    match node.kind {
        NodeKind::Enter { .. } => Ok(enter_child),
        NodeKind::Exit => {
            let parent = frames[frame as usize].parent;
            if parent == NO_FRAME {
                return Err(Status::invalid_argument(format!(
                    "its input comes from Exit '{}', which is outside any loop frame",
                    node.name
                )));
            }
            Ok(parent)
        }
        _ => Ok(frame),
    }
}

fn frame_label(frames: &[StaticFrame], frame: u32) -> &str {
    if frame == 0 { "<root>" } else { &frames[frame as usize].name }
}
