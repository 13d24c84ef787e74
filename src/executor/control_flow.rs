//! Running a partition with v1 control flow (`Enter`, `Exit`, `Switch`,
//! `Merge`, `NextIteration`, `LoopCond`): frames, iterations and dead
//! values, with TensorFlow's semantics.
//!
//! Owns: the per-step frame instances ([`FrameState`]), their iterations
//! ([`IterState`]: pending counts, dead counts and input slots of the
//! frame's nodes) and the propagation rules. Must not know about sockets
//! or graph rewriting; kernels run through `run::compute_kernel` as in
//! the plain executor, which keeps the fast path for graphs without
//! control flow (`run.rs`).
//!
//! The rules, as TensorFlow's executor has them:
//! - A node runs once per iteration of its frame, when every input of that
//!   iteration has arrived. If any arrived dead (or a control input came
//!   from a dead node), it does not compute: all its outputs are dead.
//! - `Switch` sends its data to one output; the other is dead. `Merge`
//!   runs on its first live input (its low pending bit marks "none yet"),
//!   or dead once all its data inputs arrived dead.
//! - `Enter` moves a value into iteration 0 of a child frame instance (one
//!   per parent frame instance and iteration); a constant `Enter` reaches
//!   every iteration. `NextIteration` moves a value to the next iteration,
//!   starting it unless `parallel_iterations` are already in flight (then
//!   it waits until the oldest finishes); a dead one stops. `Exit` moves a
//!   live value to the parent; an `Exit` that never saw a live value
//!   delivers a dead one when its frame instance ends.
//! - An iteration is done when none of its nodes is ready or running, no
//!   child frame of it is alive, and the iteration before it is done
//!   (iteration 0: every `Enter` of the frame arrived). A frame instance
//!   is done when all its `Enter`s arrived and all its iterations are.
//!
//! The step ends when no node is ready or running anywhere: `outstanding`
//! counts them, raised before a ready node is handed out and lowered after
//! its outputs were propagated, all under one lock, so it reaches zero
//! exactly once.

use super::barrier::StepDone;
use super::frames::{ControlFlowPlan, NO_FRAME};
use super::outcome::Outcome;
use super::plan::{CONTROL_PORT, HotNode, NodeKind, Plan};
use super::rendezvous::{RendezvousKey, frame_tag};
use super::run::{Executor, compute_kernel_for, thread_number};
use super::step::{Args, NodeStats, StepContext, arg_key};
use crate::error::{Result, Status};
use crate::ops::Value;
use crate::ops::control_flow::{switch_n_port, switch_port};
use crate::tensor::Tensor;
use parking_lot::Mutex;
use smallvec::{SmallVec, smallvec};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

type Values = SmallVec<[Option<Value>; 2]>;

/// A node made ready in one iteration of one frame instance.
#[derive(Clone, Copy, Debug)]
struct Tagged {
    id: u32,
    frame: u32,
    iter: u64,
    dead: bool,
    /// Not a node but a whole compiled loop instance of this static frame,
    /// entered from iteration `iter` of `frame` (`id` is its last `Enter`);
    /// [`NO_FRAME`] for a node.
    compiled_loop: u32,
}

impl Tagged {
    fn node(id: u32, frame: u32, iter: u64, dead: bool) -> Tagged {
        Tagged { id, frame, iter, dead, compiled_loop: NO_FRAME }
    }
}

/// Starts a step of `executor`'s partition (which has control flow).
pub(super) fn run_async(executor: &Arc<Executor>, step: Arc<StepContext>, done: StepDone) {
    let exec = Arc::new(CfExecution {
        executor: executor.clone(),
        step,
        state: Mutex::new(State::default()),
        outcome: Outcome::new(done),
    });
    let mut ready = Vec::new();
    {
        let mut state = exec.state.lock();
        state.run_compiled = !exec.step.collects_stats();
        let plan = &executor.plan;
        let root = state.new_frame(exec.cf(), 0, None);
        for &id in &plan.roots {
            ready.push(Tagged::node(id, root, 0, false));
        }
        state.frame_mut(root).iteration_mut(0).outstanding_ops = ready.len() as u32;
        state.outstanding = ready.len();
    }
    if ready.is_empty() {
        exec.outcome.finish(&exec.step);
        return;
    }
    exec.drain(&mut ready);
}

struct CfExecution {
    executor: Arc<Executor>,
    step: Arc<StepContext>,
    state: Mutex<State>,
    outcome: Outcome,
}

#[derive(Default)]
struct State {
    /// Live frame instances; a slot is `None` once its frame is done.
    frames: Vec<Option<FrameState>>,
    free_frames: Vec<u32>,
    /// (parent instance, parent iteration, static frame) → instance.
    children: HashMap<(u32, u64, u32), u32>,
    /// Nodes ready or running, in every frame.
    outstanding: usize,
    /// Whether loops of the simple shape run as compiled programs (not
    /// when the step collects per-node stats: those name every node run).
    run_compiled: bool,
    /// Compiled loop instances still waiting for `Enter` values, by
    /// (parent instance, parent iteration, static frame).
    compiled_pending: HashMap<(u32, u64, u32), PendingLoop>,
}

/// The `Enter` values of a compiled loop instance gathered so far.
struct PendingLoop {
    values: Vec<Option<Value>>,
    arrived: usize,
    dead: bool,
}

struct FrameState {
    static_id: u32,
    parent: Option<(u32, u64)>,
    /// Names this instance in rendezvous keys, alike in every partition
    /// (0 for the root frame).
    tag: u64,
    /// Iterations `first_iter ..= iteration_count`, oldest first.
    iterations: VecDeque<IterState>,
    first_iter: u64,
    iteration_count: u64,
    num_outstanding_iterations: u32,
    /// `Enter`s of the frame that have not delivered yet.
    num_pending_inputs: u32,
    /// Values of constant `Enter`s, handed to every new iteration.
    invariants: Vec<(u32, Option<Value>, bool)>,
    /// `NextIteration` values waiting for an iteration to finish.
    next_iter_roots: Vec<(u32, Option<Value>)>,
    /// `Exit` nodes that delivered a live value.
    exited_live: SmallVec<[u32; 4]>,
    spare: Vec<IterState>,
}

struct IterState {
    pending: Vec<u32>,
    dead: Vec<u32>,
    slots: Vec<Option<Value>>,
    outstanding_ops: u32,
    outstanding_frames: u32,
}

impl IterState {
    fn new(cf: &ControlFlowPlan, static_id: u32) -> IterState {
        let frame = &cf.frames[static_id as usize];
        IterState {
            pending: frame.initial_pending.clone(),
            dead: vec![0; frame.initial_pending.len()],
            slots: (0..frame.num_slots).map(|_| None).collect(),
            outstanding_ops: 0,
            outstanding_frames: 0,
        }
    }

    fn reset(&mut self, cf: &ControlFlowPlan, static_id: u32) {
        self.pending.copy_from_slice(&cf.frames[static_id as usize].initial_pending);
        self.dead.iter_mut().for_each(|d| *d = 0);
        self.slots.iter_mut().for_each(|s| *s = None);
        self.outstanding_ops = 0;
        self.outstanding_frames = 0;
    }
}

impl FrameState {
    fn iteration_mut(&mut self, iter: u64) -> &mut IterState {
        let index = iter.checked_sub(self.first_iter).expect("an iteration of a frame is alive while it has work");
        &mut self.iterations[index as usize]
    }

    fn iteration(&self, iter: u64) -> Option<&IterState> {
        iter.checked_sub(self.first_iter).and_then(|i| self.iterations.get(i as usize))
    }

    fn is_iteration_done(&self, iter: u64) -> bool {
        let Some(state) = self.iteration(iter) else { return true };
        state.outstanding_ops == 0
            && state.outstanding_frames == 0
            && if iter == 0 { self.num_pending_inputs == 0 } else { iter == self.first_iter }
    }

    fn is_done(&self) -> bool {
        self.num_pending_inputs == 0 && self.num_outstanding_iterations == 0
    }
}

impl State {
    fn frame_mut(&mut self, frame: u32) -> &mut FrameState {
        self.frames[frame as usize].as_mut().expect("a frame instance is alive while it has work")
    }

    fn frame(&self, frame: u32) -> &FrameState {
        self.frames[frame as usize].as_ref().expect("a frame instance is alive while it has work")
    }

    fn new_frame(&mut self, cf: &ControlFlowPlan, static_id: u32, parent: Option<(u32, u64)>) -> u32 {
        let tag = match parent {
            None => 0,
            Some((p, iter)) => frame_tag(self.frame(p).tag, iter, &cf.frames[static_id as usize].name),
        };
        let state = FrameState {
            static_id,
            parent,
            tag,
            iterations: VecDeque::from([IterState::new(cf, static_id)]),
            first_iter: 0,
            iteration_count: 0,
            num_outstanding_iterations: 1,
            num_pending_inputs: cf.frames[static_id as usize].num_enters,
            invariants: Vec::new(),
            next_iter_roots: Vec::new(),
            exited_live: SmallVec::new(),
            spare: Vec::new(),
        };
        match self.free_frames.pop() {
            Some(slot) => {
                self.frames[slot as usize] = Some(state);
                slot
            }
            None => {
                self.frames.push(Some(state));
                (self.frames.len() - 1) as u32
            }
        }
    }

    /// The instance of `static_id` entered from iteration `iter` of `frame`.
    fn child_frame(&mut self, cf: &ControlFlowPlan, frame: u32, iter: u64, static_id: u32) -> u32 {
        if let Some(&child) = self.children.get(&(frame, iter, static_id)) {
            return child;
        }
        let child = self.new_frame(cf, static_id, Some((frame, iter)));
        self.children.insert((frame, iter, static_id), child);
        self.frame_mut(frame).iteration_mut(iter).outstanding_frames += 1;
        child
    }

    /// Starts the next iteration of `frame`, handing it the loop invariants.
    fn start_iteration(&mut self, plan: &Plan, cf: &ControlFlowPlan, frame: u32, ready: &mut Vec<Tagged>) -> u64 {
        let f = self.frame_mut(frame);
        f.iteration_count += 1;
        f.num_outstanding_iterations += 1;
        let static_id = f.static_id;
        let state = match f.spare.pop() {
            Some(mut s) => {
                s.reset(cf, static_id);
                s
            }
            None => IterState::new(cf, static_id),
        };
        f.iterations.push_back(state);
        let iter = f.iteration_count;
        for k in 0..f.invariants.len() {
            let (enter, value, dead) = self.frame(frame).invariants[k].clone();
            let mut outputs: Values = smallvec![value];
            self.activate(plan, cf, enter, dead, &mut outputs, frame, iter, ready);
        }
        iter
    }

    /// Hands node `src`'s outputs to its consumers in iteration `iter` of
    /// `frame`, pushing those that became ready.
    #[allow(clippy::too_many_arguments)]
    fn activate(
        &mut self,
        plan: &Plan,
        cf: &ControlFlowPlan,
        src: u32,
        src_dead: bool,
        outputs: &mut [Option<Value>],
        frame: u32,
        iter: u64,
        ready: &mut Vec<Tagged>,
    ) {
        let hot = &plan.hot[src as usize];
        let edges = &plan.edges[hot.first_edge as usize..][..hot.num_edges as usize];
        let state = self.frame_mut(frame).iteration_mut(iter);
        for (i, edge) in edges.iter().enumerate() {
            let dst = edge.dst as usize;
            let local = cf.local[dst] as usize;
            let is_merge = cf.flags[dst] & ControlFlowPlan::MERGE != 0;
            let data_inputs = cf.num_data_inputs[dst];
            let (now_ready, now_dead) = if edge.port == CONTROL_PORT {
                if is_merge {
                    state.pending[local] = state.pending[local].saturating_sub(2);
                    let all_dead = state.dead[local] == data_inputs;
                    let p = state.pending[local];
                    (p == 0 || (p == 1 && all_dead), p != 0 && all_dead)
                } else {
                    if src_dead {
                        state.dead[local] += 1;
                    }
                    state.pending[local] = state.pending[local].saturating_sub(1);
                    (state.pending[local] == 0, state.dead[local] > 0)
                }
            } else {
                let port = edge.port as usize;
                let last_of_port = edges.get(i + 1).is_none_or(|next| next.port != edge.port);
                let value = if last_of_port { outputs[port].take() } else { outputs[port].clone() };
                let slot = cf.slot_local[edge.slot as usize] as usize;
                if is_merge {
                    match value {
                        Some(v) => {
                            let p = state.pending[local];
                            if p & 1 == 1 {
                                state.slots[slot] = Some(v);
                                state.pending[local] = p - 1;
                            }
                            (p == 1, false)
                        }
                        None => {
                            state.dead[local] += 1;
                            let all_dead = state.dead[local] == data_inputs;
                            (state.pending[local] == 1 && all_dead, all_dead)
                        }
                    }
                } else {
                    match value {
                        Some(v) => state.slots[slot] = Some(v),
                        None => state.dead[local] += 1,
                    }
                    debug_assert!(state.pending[local] > 0, "node {dst} activated past its inputs");
                    state.pending[local] = state.pending[local].saturating_sub(1);
                    (state.pending[local] == 0, state.dead[local] > 0)
                }
            };
            if now_ready {
                // A ControlTrigger runs whatever its inputs were.
                let dead = now_dead && cf.flags[dst] & ControlFlowPlan::TRIGGER == 0;
                state.outstanding_ops += 1;
                ready.push(Tagged::node(edge.dst, frame, iter, dead));
            }
        }
    }

    /// Node `t` finished with `outputs` (dead ones `None`): moves them
    /// along by its kind's rule.
    fn propagate(
        &mut self,
        plan: &Plan,
        cf: &ControlFlowPlan,
        t: Tagged,
        outputs: &mut Values,
        ready: &mut Vec<Tagged>,
    ) {
        match plan.nodes[t.id as usize].kind {
            NodeKind::Enter { .. }
                if self.run_compiled && cf.compiled[cf.enter_child[t.id as usize] as usize].is_some() =>
            {
                self.gather_compiled(cf, t, outputs, ready);
            }
            NodeKind::Enter { is_constant } => {
                let child = self.child_frame(cf, t.frame, t.iter, cf.enter_child[t.id as usize]);
                if is_constant {
                    let value = outputs[0].clone();
                    let f = self.frame_mut(child);
                    f.invariants.push((t.id, value, t.dead));
                    let alive: Vec<u64> = (f.first_iter..=f.iteration_count).collect();
                    for iter in alive {
                        let mut copy: Values = smallvec![outputs[0].clone()];
                        self.activate(plan, cf, t.id, t.dead, &mut copy, child, iter, ready);
                    }
                } else {
                    self.activate(plan, cf, t.id, t.dead, outputs, child, 0, ready);
                }
                let f = self.frame_mut(child);
                f.num_pending_inputs = f.num_pending_inputs.saturating_sub(1);
                self.cleanup(plan, cf, child, ready);
            }
            NodeKind::Exit => {
                if t.dead || outputs[0].is_none() {
                    return;
                }
                let f = self.frame_mut(t.frame);
                if f.exited_live.contains(&t.id) {
                    return;
                }
                f.exited_live.push(t.id);
                let (parent, parent_iter) = f.parent.expect("an Exit's frame has a parent");
                self.activate(plan, cf, t.id, false, outputs, parent, parent_iter, ready);
            }
            NodeKind::NextIteration => {
                if t.dead || outputs[0].is_none() {
                    return;
                }
                let f = self.frame_mut(t.frame);
                let limit = cf.frames[f.static_id as usize].parallel_iterations;
                if t.iter == f.iteration_count && f.num_outstanding_iterations >= limit {
                    f.next_iter_roots.push((t.id, outputs[0].take()));
                    return;
                }
                let next = if t.iter == f.iteration_count {
                    self.start_iteration(plan, cf, t.frame, ready)
                } else {
                    t.iter + 1
                };
                self.activate(plan, cf, t.id, false, outputs, t.frame, next, ready);
            }
            _ => self.activate(plan, cf, t.id, t.dead, outputs, t.frame, t.iter, ready),
        }
    }

    /// An `Enter` of a compiled loop delivered: once all of the instance's
    /// have, the instance becomes one ready task of the parent iteration.
    fn gather_compiled(&mut self, cf: &ControlFlowPlan, t: Tagged, outputs: &mut Values, ready: &mut Vec<Tagged>) {
        let child = cf.enter_child[t.id as usize];
        let Some(compiled) = cf.compiled[child as usize].as_ref() else { return };
        let Some(index) = compiled.enter_index(t.id) else { return };
        let key = (t.frame, t.iter, child);
        let pending = self.compiled_pending.entry(key).or_insert_with(|| PendingLoop {
            values: vec![None; compiled.enters.len()],
            arrived: 0,
            dead: false,
        });
        let value = outputs.first_mut().and_then(Option::take);
        pending.dead |= t.dead || value.is_none();
        pending.values[index] = value;
        pending.arrived += 1;
        if pending.arrived == compiled.enters.len() {
            self.frame_mut(t.frame).iteration_mut(t.iter).outstanding_ops += 1;
            ready.push(Tagged { id: t.id, frame: t.frame, iter: t.iter, dead: false, compiled_loop: child });
        }
    }

    /// Retires finished iterations of `frame` from the oldest, starts one
    /// that was waiting for room, and ends the frame instance (and, in
    /// turn, iterations of its parent) once it is done.
    fn cleanup(&mut self, plan: &Plan, cf: &ControlFlowPlan, mut frame: u32, ready: &mut Vec<Tagged>) {
        loop {
            let f = self.frame_mut(frame);
            let mut retired = false;
            while !f.iterations.is_empty() && f.is_iteration_done(f.first_iter) {
                if let Some(state) = f.iterations.pop_front() {
                    f.spare.push(state);
                }
                f.first_iter += 1;
                f.num_outstanding_iterations -= 1;
                retired = true;
            }
            if retired && !f.next_iter_roots.is_empty() {
                let roots = std::mem::take(&mut f.next_iter_roots);
                let iter = self.start_iteration(plan, cf, frame, ready);
                for (next, value) in roots {
                    let mut outputs: Values = smallvec![value];
                    self.activate(plan, cf, next, false, &mut outputs, frame, iter, ready);
                }
            }
            let f = self.frame(frame);
            if !f.is_done() {
                return;
            }
            let Some(state) = self.frames[frame as usize].take() else { return };
            self.free_frames.push(frame);
            let Some((parent, parent_iter)) = state.parent else { return };
            self.children.remove(&(parent, parent_iter, state.static_id));
            for &exit in &cf.frames[state.static_id as usize].exits {
                if !state.exited_live.contains(&exit) {
                    let mut outputs: Values = smallvec![None];
                    self.activate(plan, cf, exit, true, &mut outputs, parent, parent_iter, ready);
                }
            }
            let p = self.frame_mut(parent).iteration_mut(parent_iter);
            p.outstanding_frames -= 1;
            frame = parent;
        }
    }

    /// Node `t` is finished (its outputs already propagated).
    fn retire(&mut self, plan: &Plan, cf: &ControlFlowPlan, t: Tagged, ready: &mut Vec<Tagged>) {
        let state = self.frame_mut(t.frame).iteration_mut(t.iter);
        state.outstanding_ops -= 1;
        if state.outstanding_ops == 0 {
            self.cleanup(plan, cf, t.frame, ready);
        }
    }
}

impl CfExecution {
    fn plan(&self) -> &Plan {
        &self.executor.plan
    }

    fn cf(&self) -> &ControlFlowPlan {
        self.executor.plan.control_flow.as_ref().expect("the control-flow executor runs plans with frames")
    }

    /// Runs ready nodes until none is left. Cheap ones (control flow, dead
    /// nodes, kernels not marked expensive) run back to back under one
    /// hold of the state lock: a loop's iteration is mostly such nodes, and
    /// a lock round trip per node would cost more than the node.
    fn drain(self: &Arc<Self>, ready: &mut Vec<Tagged>) {
        while let Some(t) = ready.pop() {
            if t.compiled_loop != NO_FRAME {
                self.run_compiled(t, ready);
                continue;
            }
            if self.runs_locked(t) {
                let mut state = self.state.lock();
                let mut next = Some(t);
                let mut finished = false;
                while let Some(t) = next {
                    let mut inputs = self.take_inputs(&mut state, t);
                    let start_us = self.start_us(t);
                    let outputs = self
                        .outputs_of(t, &mut inputs)
                        .unwrap_or_else(|| Err(Status::internal("a node that waits ran under the state lock")));
                    drop(inputs);
                    if let Some(start_us) = start_us {
                        self.record(t, start_us);
                    }
                    finished = self.complete_locked(&mut state, t, outputs, ready);
                    next = match ready.last() {
                        Some(&n) if self.runs_locked(n) => ready.pop(),
                        _ => None,
                    };
                }
                drop(state);
                if finished {
                    self.outcome.finish(&self.step);
                }
                continue;
            }
            let hot = &self.plan().hot[t.id as usize];
            if !t.dead && hot.has(HotNode::EXPENSIVE) && !ready.is_empty() {
                let exec = self.clone();
                self.executor.device.pool.spawn(move || exec.drain(&mut vec![t]));
                continue;
            }
            self.process(t, ready);
        }
    }

    /// Runs a compiled loop instance off the state lock, then hands its
    /// `Exit` values to the parent iteration (all dead when an `Enter`
    /// was: the loop sits in an untaken branch).
    fn run_compiled(&self, t: Tagged, ready: &mut Vec<Tagged>) {
        let cf = self.cf();
        let Some(compiled) = cf.compiled[t.compiled_loop as usize].as_ref() else { return };
        let pending = self.state.lock().compiled_pending.remove(&(t.frame, t.iter, t.compiled_loop));
        let result = match pending {
            _ if self.outcome.failed() || self.step.is_cancelled() => Ok(Vec::new()),
            None => Err(Status::internal(format!(
                "loop frame '{}': its Enter values are gone",
                cf.frames[t.compiled_loop as usize].name
            ))),
            Some(p) if p.dead => Ok(vec![None; compiled.exits.len()]),
            Some(p) => compiled.run(&self.executor, p.values, &|| {
                if self.outcome.failed() {
                    Some(Status::cancelled("the step failed elsewhere"))
                } else if self.step.is_cancelled() {
                    Some(self.step.cancel_status().cloned().unwrap_or_else(|| Status::cancelled("step cancelled")))
                } else {
                    None
                }
            }),
        };
        let plan = self.plan();
        let mut state = self.state.lock();
        let before = ready.len();
        match result {
            Ok(exits) if !self.outcome.failed() && !self.step.is_cancelled() => {
                for (&(exit, _), value) in compiled.exits.iter().zip(exits) {
                    let dead = value.is_none();
                    let mut outputs: Values = smallvec![value];
                    state.activate(plan, cf, exit, dead, &mut outputs, t.frame, t.iter, ready);
                }
            }
            Ok(_) => {}
            Err(e) => self.outcome.fail(e, &self.step),
        }
        let finished = self.retire_locked(&mut state, t, before, ready);
        drop(state);
        if finished {
            self.outcome.finish(&self.step);
        }
    }

    /// Whether `t` runs under the state lock: it neither waits, nor talks
    /// to the rendezvous or the call frame, nor is worth a thread.
    #[inline]
    fn runs_locked(&self, t: Tagged) -> bool {
        if t.compiled_loop != NO_FRAME {
            return false;
        }
        let flags = self.cf().flags[t.id as usize];
        flags & ControlFlowPlan::LOCKED != 0
            || (t.dead && matches!(self.plan().nodes[t.id as usize].kind, NodeKind::Kernel { .. }))
    }

    fn start_us(&self, t: Tagged) -> Option<u64> {
        // A dead node computes nothing; stats show what ran.
        (self.step.collects_stats() && !t.dead).then(|| self.step.stats_clock_us())
    }

    /// Takes node `t`'s inputs for its iteration.
    fn take_inputs(&self, state: &mut State, t: Tagged) -> Values {
        let plan = self.plan();
        let cf = self.cf();
        let hot = &plan.hot[t.id as usize];
        let iteration = state.frame_mut(t.frame).iteration_mut(t.iter);
        let mut inputs = Values::new();
        let base = hot.input_base as usize;
        for slot in base..base + hot.num_inputs as usize {
            inputs.push(match &plan.slot_const[slot] {
                // Kernels borrow bound constants from the plan.
                Some(c) if !hot.has(HotNode::KERNEL) => Some(c.clone()),
                Some(_) => None,
                None => iteration.slots[cf.slot_local[slot] as usize].take(),
            });
        }
        inputs
    }

    /// A node run off the lock: a wait, a transfer, the call frame, or an
    /// expensive kernel.
    fn process(self: &Arc<Self>, t: Tagged, ready: &mut Vec<Tagged>) {
        let mut inputs = {
            let mut state = self.state.lock();
            self.take_inputs(&mut state, t)
        };
        let start_us = self.start_us(t);
        // What a `_Send` is about to send, for its stats.
        let sent_bytes = start_us.map(|_| {
            inputs.first().and_then(Option::as_ref).and_then(Value::as_tensor).map_or(0, |v| v.byte_len() as u64)
        });
        let Some(outputs) = self.outputs_of(t, &mut inputs) else { return };
        drop(inputs);
        if let Some(start_us) = start_us {
            self.record_transfer(t, start_us, sent_bytes);
        }
        self.complete(t, outputs, ready);
    }

    /// What node `t` gives for `inputs`; `None` when it waits for a value
    /// (it completes later, from `wait_for`).
    fn outputs_of(self: &Arc<Self>, t: Tagged, inputs: &mut Values) -> Option<Result<Values>> {
        let plan = self.plan();
        let hot = &plan.hot[t.id as usize];
        let node = &plan.nodes[t.id as usize];
        let n = hot.num_outputs as usize;
        if self.outcome.failed() || self.step.is_cancelled() {
            return Some(Ok(SmallVec::new()));
        }
        if t.dead {
            return Some(match &node.kind {
                NodeKind::Retval(index) => Err(Status::invalid_argument(format!(
                    "{}: fetch #{index} is dead: it was computed on a branch that was not taken",
                    node.describe()
                ))),
                // The receiver learns the deadness: its partition may
                // hold the rest of the branch or of the iteration.
                NodeKind::Send(key) => {
                    let key = self.key_in_frame(key, t);
                    self.step.rendezvous.send(&key, Value::Dead).map(|()| SmallVec::new())
                }
                _ => Ok(smallvec![None; n]),
            });
        }
        Some(match &node.kind {
            NodeKind::Kernel { .. } => {
                let mut outputs: Values = smallvec![None; n];
                compute_kernel_for(&self.executor, &self.step, t.id, hot, inputs, &mut outputs).and_then(|()| {
                    match outputs.iter().position(Option::is_none) {
                        Some(missing) => {
                            Err(Status::internal(format!("{}: output {missing} was not set", node.describe())))
                        }
                        None => Ok(outputs),
                    }
                })
            }
            NodeKind::Arg(index) => match &self.step.frame.args {
                Args::Ready(values) => match values.get(*index).and_then(Option::as_ref) {
                    Some(v) => Ok(smallvec![Some(v.clone())]),
                    None => Err(Status::internal(format!("{}: no feed #{index}", node.describe()))),
                },
                Args::Partial => {
                    self.wait_for(t, &arg_key(*index));
                    return None;
                }
            },
            NodeKind::Retval(index) => take(inputs, 0, node)
                .and_then(Value::into_tensor)
                .and_then(|v| self.step.frame.retvals.set(*index, Value::Tensor(v)))
                .map(|()| SmallVec::new()),
            NodeKind::Send(key) => take(inputs, 0, node)
                .and_then(Value::into_tensor)
                .and_then(|v| self.step.rendezvous.send(&self.key_in_frame(key, t), Value::Tensor(v)))
                .map(|()| SmallVec::new()),
            NodeKind::Recv(key) => {
                let key = self.key_in_frame(key, t);
                self.wait_for(t, &key);
                return None;
            }
            // Pass-throughs hand their input slots on as their outputs.
            NodeKind::Enter { .. } | NodeKind::Exit | NodeKind::NextIteration | NodeKind::LoopCond => {
                match inputs.first() {
                    Some(Some(_)) => Ok(std::mem::take(inputs)),
                    _ => Err(Status::internal(format!("{}: input 0 missing", node.describe()))),
                }
            }
            NodeKind::Switch => routed(inputs, node, n, switch_port),
            NodeKind::SwitchN(outs) => routed(inputs, node, n, |index| switch_n_port(index, *outs)),
            NodeKind::Merge => match inputs.iter().position(Option::is_some) {
                // The index is built only for a graph that reads it.
                Some(i) => Ok(smallvec![
                    inputs[i].take(),
                    self.cf().merge_index_used[t.id as usize].then(|| Value::Tensor(Tensor::scalar(i as i32)))
                ]),
                None => Err(Status::internal(format!("{}: ran without a live input", node.describe()))),
            },
        })
    }

    /// Propagates `t`'s outputs (or records its failure) and retires it.
    fn complete(&self, t: Tagged, outputs: Result<Values>, ready: &mut Vec<Tagged>) {
        let mut state = self.state.lock();
        let finished = self.complete_locked(&mut state, t, outputs, ready);
        drop(state);
        if finished {
            self.outcome.finish(&self.step);
        }
    }

    /// `complete` with the state lock held; true when the step is over
    /// (the caller then calls `finish`, after releasing the lock).
    fn complete_locked(&self, state: &mut State, t: Tagged, outputs: Result<Values>, ready: &mut Vec<Tagged>) -> bool {
        let plan = self.plan();
        let cf = self.cf();
        let before = ready.len();
        match outputs {
            Ok(mut outputs) if !self.outcome.failed() && !self.step.is_cancelled() => {
                // Empty outputs for a node that has some: skipped after a
                // failure, nothing to hand on.
                if !(outputs.is_empty() && plan.hot[t.id as usize].num_outputs > 0) {
                    state.propagate(plan, cf, t, &mut outputs, ready);
                }
            }
            Ok(_) => {}
            Err(e) => self.outcome.fail(e, &self.step),
        }
        self.retire_locked(state, t, before, ready)
    }

    /// Retires `t`, whose outputs made `ready[before..]` ready, and
    /// accounts them; true when the step is over.
    fn retire_locked(&self, state: &mut State, t: Tagged, before: usize, ready: &mut Vec<Tagged>) -> bool {
        state.retire(self.plan(), self.cf(), t, ready);
        // Nodes made ready after a failure are dropped: nothing runs on.
        if self.outcome.failed() {
            ready.truncate(before);
        }
        let made = ready.len() - before;
        state.outstanding = state.outstanding + made - 1;
        state.outstanding == 0
    }

    fn record(&self, t: Tagged, start_us: u64) {
        self.record_transfer(t, start_us, None);
    }

    /// `record`, for a `_Send`/`_Recv` with the bytes it moved (its key is
    /// the node's, in `t`'s frame instance and iteration).
    fn record_transfer(&self, t: Tagged, start_us: u64, bytes: Option<u64>) {
        let plan = self.plan();
        let node = &plan.nodes[t.id as usize];
        let (rendezvous_key, bytes) = match (&node.kind, bytes) {
            (NodeKind::Send(key) | NodeKind::Recv(key), Some(bytes)) => {
                (self.key_in_frame(key, t).as_str().to_string(), bytes)
            }
            _ => (String::new(), 0),
        };
        let frame = self.cf().node_frame[t.id as usize];
        self.step.record(NodeStats {
            node: node.name.clone(),
            op: node.op.clone(),
            device: self.executor.device.name_str.clone(),
            start_us,
            end_us: self.step.stats_clock_us(),
            thread: thread_number(),
            frame: if frame == 0 || frame == NO_FRAME {
                String::new()
            } else {
                self.cf().frames[frame as usize].name.clone()
            },
            iter: t.iter,
            rendezvous_key,
            bytes,
        });
    }

    /// `key` for the frame instance and iteration `t` runs in: a transfer
    /// inside a loop happens once per iteration, each under its own key.
    fn key_in_frame(&self, key: &RendezvousKey, t: Tagged) -> RendezvousKey {
        let tag = self.state.lock().frame(t.frame).tag;
        if tag == 0 { key.clone() } else { key.in_frame(tag, t.iter) }
    }

    /// A `_Recv` or a partial run's `_Arg`: finishes when its value arrives,
    /// on a pool thread. A dead value makes the node dead.
    fn wait_for(self: &Arc<Self>, t: Tagged, key: &RendezvousKey) {
        let exec = self.clone();
        let start_us = self.step.collects_stats().then(|| self.step.stats_clock_us());
        self.step.rendezvous.recv_async(
            key,
            Box::new(move |result| {
                let pool = exec.executor.device.pool.clone();
                pool.spawn(move || {
                    if let Some(start_us) = start_us {
                        exec.record_transfer(t, start_us, Some(super::step::received_bytes(&result)));
                    }
                    let node = &exec.plan().nodes[t.id as usize];
                    let mut t = t;
                    let outputs = result
                        .map(|v| match v {
                            Value::Dead => {
                                t.dead = true;
                                smallvec![None]
                            }
                            v => smallvec![Some(v)],
                        })
                        .map_err(|e| e.context(node.describe()));
                    let mut ready = Vec::new();
                    exec.complete(t, outputs, &mut ready);
                    exec.drain(&mut ready);
                });
            }),
        );
    }
}

fn take(inputs: &mut Values, i: usize, node: &super::plan::PlanNode) -> Result<Value> {
    inputs
        .get_mut(i)
        .and_then(Option::take)
        .ok_or_else(|| Status::internal(format!("{}: input {i} missing", node.describe())))
}

/// A `Switch`/`_SwitchN`: the data goes to the output `port_of` picks from
/// the second input; the others are dead.
fn routed(
    inputs: &mut Values,
    node: &super::plan::PlanNode,
    n: usize,
    port_of: impl FnOnce(&Tensor) -> Result<usize>,
) -> Result<Values> {
    let selector = take(inputs, 1, node)?.into_tensor()?;
    let port = port_of(&selector).map_err(|e| e.context(node.describe()))?;
    let mut outputs: Values = smallvec![None; n];
    outputs[port] = Some(take(inputs, 0, node)?);
    Ok(outputs)
}
