//! Loops run as straight-line programs: a leaf loop frame whose nodes all
//! live in one partition is compiled, when the plan is built, into two
//! instruction lists over registers (the condition part, run every
//! iteration, and the body, run while the predicate holds), and a frame
//! instance then runs as a Rust loop instead of node by node through the
//! frame machinery of `control_flow.rs`.
//!
//! Owns: [`CompiledLoop`] (what may be compiled, the registers, the
//! program) and running one instance of it. Must not touch frame or
//! iteration state: `control_flow.rs` collects the instance's `Enter`
//! values, calls [`CompiledLoop::run`] off its state lock and hands the
//! `Exit` values on.
//!
//! Which loops: the shape `tf.while_loop` emits. Each loop variable is a
//! `Merge` of a non-constant `Enter` and a `NextIteration`; one `LoopCond`;
//! every `Switch` routes a condition-part value on that `LoopCond`, its
//! true side feeding the body and its false side an `Exit`; every
//! `NextIteration` is fed from the body; the rest are kernels. No nested
//! frame, no transfer, no other `Switch`/`Merge` (a cond in the body), no
//! use of a `Merge`'s index: anything else keeps the general executor,
//! whose result is the same. `Merge`, `Switch`, `LoopCond`, `Exit`,
//! `NextIteration` and a plain `Identity` cost nothing here: their outputs
//! are the registers of their inputs. Iterations run one after another
//! (one of the schedules `parallel_iterations` allows).

use super::frames::{ControlFlowPlan, NO_FRAME};
use super::plan::{CONTROL_PORT, HotNode, NodeKind, OutEdge, PlanNode};
use super::run::{Executor, call_kernel_lending};
use crate::error::{Result, Status};
use crate::ops::numeric::Num;
use crate::ops::{OpContext, ResourceMgr, Value};
use crate::tensor::{DType, Element, Tensor};
use smallvec::SmallVec;
use std::collections::HashMap;

/// One step of a loop's program.
enum Instr {
    /// Runs kernel node `id`; inputs come from registers or, for
    /// constants, are lent (`lent[i]`; empty when none is), outputs go to
    /// registers (`None`: nobody in the loop reads that port).
    Kernel {
        id: u32,
        inputs: Box<[Input]>,
        lent: Box<[Option<Value>]>,
        outputs: Box<[Option<u32>]>,
        scalar: Option<ScalarOp>,
    },
    /// A `Const` inside the loop (it runs in the frame through a control
    /// edge): its value, computed once.
    Const { value: Value, reg: u32 },
}

/// Where a kernel's input comes from.
#[derive(Clone, Copy)]
struct Input {
    /// `None`: a lent constant.
    reg: Option<u32>,
    /// This is the register's last read before it is written again: the
    /// kernel gets the value itself, and may reuse its buffer.
    take: bool,
}

/// A loop variable: its `Merge`'s register, the `Enter` that starts it and
/// the register its `NextIteration` reads.
struct LoopVar {
    reg: u32,
    enter: u32,
    next: u32,
}

pub(crate) struct CompiledLoop {
    /// The frame's `Enter` nodes (in the parent frame); their values fill
    /// registers `0..enters.len()` in this order.
    pub enters: Vec<u32>,
    vars: Vec<LoopVar>,
    num_regs: usize,
    condition: Vec<Instr>,
    predicate: u32,
    body: Vec<Instr>,
    /// The frame's `Exit` nodes and the register each gives its parent.
    pub exits: Vec<(u32, u32)>,
    /// For errors: the frame's name.
    frame_name: String,
}

/// Which part of an iteration a value belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    /// Computed every iteration, the last one included.
    Condition,
    /// Computed while the predicate holds.
    Body,
    /// A `Switch`'s false output: only an `Exit` may read it.
    Leaving,
}

/// The plan's pieces a loop is compiled from.
pub(crate) struct LoopSource<'a> {
    pub nodes: &'a [PlanNode],
    pub hot: &'a [HotNode],
    pub out_edges: &'a [Vec<OutEdge>],
    pub slot_const: &'a [Option<Value>],
    pub cf: &'a ControlFlowPlan,
}

/// Compiles every leaf frame that has the simple shape; `None` for the
/// others (and for the root).
pub(crate) fn compile_loops(source: &LoopSource<'_>) -> Result<Vec<Option<CompiledLoop>>> {
    let num_frames = source.cf.frames.len();
    let mut compiled: Vec<Option<CompiledLoop>> = (0..num_frames).map(|_| None).collect();
    for (frame, slot) in compiled.iter_mut().enumerate().skip(1) {
        *slot = Compiler::new(source, frame as u32).compile()?;
    }
    Ok(compiled)
}

struct Compiler<'a, 'b> {
    source: &'b LoopSource<'a>,
    frame: u32,
    /// (node, port) → register.
    reg_of: HashMap<(u32, u32), u32>,
    side_of: HashMap<(u32, u32), Side>,
    /// Registers of the loop's `Const`s, with their values.
    constants: HashMap<u32, Value>,
    num_regs: u32,
}

/// Data inputs (by input index) and control inputs of the nodes.
struct InEdges {
    data: HashMap<u32, Vec<Option<(u32, u32)>>>,
    control: HashMap<u32, Vec<u32>>,
}

impl<'a, 'b> Compiler<'a, 'b> {
    fn new(source: &'b LoopSource<'a>, frame: u32) -> Self {
        Compiler {
            source,
            frame,
            reg_of: HashMap::new(),
            side_of: HashMap::new(),
            constants: HashMap::new(),
            num_regs: 0,
        }
    }

    fn new_reg(&mut self) -> u32 {
        self.num_regs += 1;
        self.num_regs - 1
    }

    fn in_edges(&self, members: &[u32]) -> InEdges {
        let s = self.source;
        let mut data: HashMap<u32, Vec<Option<(u32, u32)>>> =
            members.iter().map(|&m| (m, vec![None; s.hot[m as usize].num_inputs as usize])).collect();
        let mut control: HashMap<u32, Vec<u32>> = HashMap::new();
        for (src, edges) in s.out_edges.iter().enumerate() {
            for e in edges {
                let Some(inputs) = data.get_mut(&e.dst) else { continue };
                if e.port == CONTROL_PORT {
                    control.entry(e.dst).or_default().push(src as u32);
                } else {
                    let index = (e.slot - s.hot[e.dst as usize].input_base) as usize;
                    inputs[index] = Some((src as u32, e.port));
                }
            }
        }
        InEdges { data, control }
    }

    /// The program, or `None` when the frame is not of the simple shape.
    fn compile(mut self) -> Result<Option<CompiledLoop>> {
        let s = self.source;
        let cf = s.cf;
        let members: Vec<u32> =
            (0..s.nodes.len() as u32).filter(|&i| cf.node_frame[i as usize] == self.frame).collect();
        let enters: Vec<u32> =
            (0..s.nodes.len() as u32).filter(|&i| cf.enter_child[i as usize] == self.frame).collect();
        if members.is_empty() || enters.is_empty() {
            return Ok(None);
        }
        let edges = self.in_edges(&members);
        let member_set: std::collections::HashSet<u32> = members.iter().copied().collect();
        let mut constant_enters = Vec::new();
        for (k, &e) in enters.iter().enumerate() {
            let reg = self.new_reg();
            debug_assert_eq!(reg as usize, k, "enter registers come first");
            self.reg_of.insert((e, 0), reg);
            self.side_of.insert((e, 0), Side::Condition);
            let NodeKind::Enter { is_constant } = s.nodes[e as usize].kind else { return Ok(None) };
            // A loop variable's Enter feeds only its Merge.
            let feeds_merges_only = s.out_edges[e as usize]
                .iter()
                .all(|edge| edge.port != CONTROL_PORT && matches!(s.nodes[edge.dst as usize].kind, NodeKind::Merge));
            if s.out_edges[e as usize].iter().any(|edge| edge.port == CONTROL_PORT) {
                return Ok(None);
            }
            if is_constant {
                constant_enters.push(e);
            } else if !feeds_merges_only {
                return Ok(None);
            }
        }
        let mut vars = Vec::new();
        let mut next_of_merge: HashMap<u32, u32> = HashMap::new();
        let mut predicate = None;
        let mut loop_cond = None;
        let mut condition = Vec::new();
        let mut body = Vec::new();
        let mut exits = Vec::new();
        let mut next_regs: HashMap<u32, u32> = HashMap::new();
        for &id in &members {
            let node = &s.nodes[id as usize];
            let hot = &s.hot[id as usize];
            let inputs = &edges.data[&id];
            let controls = edges.control.get(&id).map_or(&[][..], Vec::as_slice);
            if inputs.iter().any(Option::is_none) && !hot.has(HotNode::KERNEL) {
                return Ok(None);
            }
            let control_side = {
                let mut side = Side::Condition;
                for &c in controls {
                    if !member_set.contains(&c) || matches!(s.nodes[c as usize].kind, NodeKind::Switch) {
                        return Ok(None);
                    }
                    match self.side_of.get(&(c, 0)) {
                        Some(Side::Body) => side = Side::Body,
                        Some(Side::Condition) => {}
                        _ => return Ok(None),
                    }
                }
                side
            };
            match &node.kind {
                NodeKind::Merge => {
                    let [Some(a), Some(b)] = inputs.as_slice() else { return Ok(None) };
                    let (enter, next) =
                        match (enters.iter().position(|&e| e == a.0), enters.iter().position(|&e| e == b.0)) {
                            (Some(k), None) => (k, b.0),
                            (None, Some(k)) => (k, a.0),
                            _ => return Ok(None),
                        };
                    let is_next = matches!(s.nodes[next as usize].kind, NodeKind::NextIteration);
                    if !controls.is_empty()
                        || !is_next
                        || cf.merge_index_used[id as usize]
                        || constant_enters.contains(&enters[enter])
                    {
                        return Ok(None);
                    }
                    let reg = self.new_reg();
                    self.reg_of.insert((id, 0), reg);
                    self.side_of.insert((id, 0), Side::Condition);
                    next_of_merge.insert(next, vars.len() as u32);
                    vars.push(LoopVar { reg, enter: enter as u32, next: u32::MAX });
                }
                NodeKind::LoopCond => {
                    let Some(input) = inputs[0] else { return Ok(None) };
                    if loop_cond.is_some() || !controls.is_empty() || self.side_of.get(&input) != Some(&Side::Condition)
                    {
                        return Ok(None);
                    }
                    let reg = self.reg_of[&input];
                    self.reg_of.insert((id, 0), reg);
                    self.side_of.insert((id, 0), Side::Condition);
                    loop_cond = Some(id);
                    predicate = Some(reg);
                }
                NodeKind::Switch => {
                    let [Some(data), Some(pred)] = inputs.as_slice() else { return Ok(None) };
                    if !controls.is_empty()
                        || Some(pred.0) != loop_cond
                        || self.side_of.get(data) != Some(&Side::Condition)
                    {
                        return Ok(None);
                    }
                    let reg = self.reg_of[data];
                    self.reg_of.insert((id, 0), reg);
                    self.reg_of.insert((id, 1), reg);
                    self.side_of.insert((id, 0), Side::Leaving);
                    self.side_of.insert((id, 1), Side::Body);
                }
                NodeKind::Exit => {
                    let Some(input) = inputs[0] else { return Ok(None) };
                    if !controls.is_empty() || self.side_of.get(&input) != Some(&Side::Leaving) {
                        return Ok(None);
                    }
                    exits.push((id, self.reg_of[&input]));
                }
                NodeKind::NextIteration => {
                    let Some(input) = inputs[0] else { return Ok(None) };
                    if !controls.is_empty() || self.side_of.get(&input) != Some(&Side::Body) {
                        return Ok(None);
                    }
                    next_regs.insert(id, self.reg_of[&input]);
                }
                NodeKind::Kernel { kernel } => {
                    if hot.has(HotNode::DEREF_INPUTS) {
                        // Reads through refs: the general executor's path.
                        return Ok(None);
                    }
                    let mut side = control_side;
                    let mut regs = Vec::with_capacity(inputs.len());
                    let mut lent: Vec<Option<Value>> = Vec::with_capacity(inputs.len());
                    for (i, input) in inputs.iter().enumerate() {
                        match input {
                            Some(src) => {
                                match self.side_of.get(src) {
                                    Some(Side::Body) => side = Side::Body,
                                    Some(Side::Condition) => {}
                                    _ => return Ok(None),
                                }
                                let reg = self.reg_of[src];
                                match self.constants.get(&reg) {
                                    Some(value) => {
                                        regs.push(None);
                                        lent.push(Some(value.clone()));
                                    }
                                    None => {
                                        regs.push(Some(reg));
                                        lent.push(None);
                                    }
                                }
                            }
                            None => match &s.slot_const[(hot.input_base as usize) + i] {
                                Some(value) => {
                                    regs.push(None);
                                    lent.push(Some(value.clone()));
                                }
                                None => return Ok(None),
                            },
                        }
                    }
                    if node.op == "Identity" && inputs.len() == 1 {
                        if let Some(src) = inputs[0] {
                            // Its output is its input's register.
                            self.reg_of.insert((id, 0), self.reg_of[&src]);
                            self.side_of.insert((id, 0), side);
                            continue;
                        }
                    }
                    let program = if side == Side::Body { &mut body } else { &mut condition };
                    if node.op == "Const" && regs.is_empty() && hot.num_outputs == 1 {
                        let mut outputs = [None];
                        let resources = ResourceMgr::default();
                        kernel
                            .compute(&mut OpContext::new(&mut [], &mut outputs, &resources))
                            .map_err(|e| e.context(node.describe()))?;
                        let Some(value) = outputs[0].take() else { return Ok(None) };
                        let reg = self.new_reg();
                        self.reg_of.insert((id, 0), reg);
                        self.side_of.insert((id, 0), side);
                        // Kernels borrow it; the register is filled only
                        // when something else reads it (see `compile`).
                        self.constants.insert(reg, value.clone());
                        program.push(Instr::Const { value, reg });
                        continue;
                    }
                    let used: Vec<bool> = (0..hot.num_outputs)
                        .map(|port| s.out_edges[id as usize].iter().any(|e| e.port == port))
                        .collect();
                    let mut outputs = Vec::with_capacity(used.len());
                    for (port, used) in used.into_iter().enumerate() {
                        if used {
                            let reg = self.new_reg();
                            self.reg_of.insert((id, port as u32), reg);
                            self.side_of.insert((id, port as u32), side);
                            outputs.push(Some(reg));
                        } else {
                            outputs.push(None);
                        }
                    }
                    // A node with no data output still orders what it
                    // controls: its side is recorded under port 0.
                    self.side_of.entry((id, 0)).or_insert(side);
                    let program = if side == Side::Body { &mut body } else { &mut condition };
                    let inputs: Box<[Input]> = regs.into_iter().map(|reg| Input { reg, take: false }).collect();
                    let lent = if lent.iter().any(Option::is_some) { lent.into() } else { Box::default() };
                    let scalar = ScalarOp::of(&node.op).filter(|_| inputs.len() == 2 && outputs.len() == 1);
                    program.push(Instr::Kernel { id, inputs, lent, outputs: outputs.into(), scalar });
                }
                _ => return Ok(None),
            }
        }
        let Some(predicate) = predicate else { return Ok(None) };
        for (next, var) in &next_of_merge {
            let Some(&reg) = next_regs.get(next) else { return Ok(None) };
            vars[*var as usize].next = reg;
        }
        if vars.is_empty() || next_regs.len() != vars.len() || vars.iter().any(|v| v.next == u32::MAX) {
            return Ok(None);
        }
        let mut frame_exits: Vec<u32> = cf.frames[self.frame as usize].exits.clone();
        let mut ours: Vec<u32> = exits.iter().map(|&(e, _)| e).collect();
        frame_exits.sort_unstable();
        ours.sort_unstable();
        if frame_exits != ours {
            return Ok(None);
        }
        debug_assert!(enters.iter().all(|&e| cf.node_frame[e as usize] != NO_FRAME));
        // A constant's register is filled only for readers other than
        // kernels (the predicate, an Exit, a NextIteration).
        let mut read: std::collections::HashSet<u32> = exits.iter().map(|&(_, r)| r).collect();
        read.insert(predicate);
        read.extend(vars.iter().map(|v| v.next));
        let needed = |instr: &Instr| !matches!(instr, Instr::Const { reg, .. } if !read.contains(reg));
        condition.retain(needed);
        body.retain(needed);
        mark_last_reads(&mut condition, &mut body, enters.len() as u32, predicate, &vars, &exits);
        Ok(Some(CompiledLoop {
            enters,
            vars,
            num_regs: self.num_regs as usize,
            condition,
            predicate,
            body,
            exits,
            frame_name: cf.frames[self.frame as usize].name.clone(),
        }))
    }
}

/// Marks the inputs that may take their register's value instead of a
/// copy: a body read that is the register's last in the body, when the
/// loop variables' update does not read it; a condition read that is the
/// register's last anywhere (no body, `Exit`, predicate or update read).
/// `Enter` registers (`0..num_enters`) live through the whole loop.
fn mark_last_reads(
    condition: &mut [Instr],
    body: &mut [Instr],
    num_enters: u32,
    predicate: u32,
    vars: &[LoopVar],
    exits: &[(u32, u32)],
) {
    let mut pinned: std::collections::HashSet<u32> = (0..num_enters).collect();
    pinned.insert(predicate);
    pinned.extend(vars.iter().map(|v| v.next));
    let mut read_in_body: std::collections::HashSet<u32> = std::collections::HashSet::new();
    let mark =
        |program: &mut [Instr], seen: &mut std::collections::HashSet<u32>, pinned: &std::collections::HashSet<u32>| {
            for instr in program.iter_mut().rev() {
                if let Instr::Kernel { inputs, .. } = instr {
                    for input in inputs.iter_mut().rev() {
                        if let Some(reg) = input.reg {
                            input.take = !pinned.contains(&reg) && seen.insert(reg);
                        }
                    }
                }
            }
        };
    mark(body, &mut read_in_body, &pinned);
    // A value the body or an Exit reads must outlive the condition part.
    pinned.extend(read_in_body.iter().copied());
    pinned.extend(exits.iter().map(|&(_, reg)| reg));
    pinned.extend(vars.iter().map(|v| v.reg));
    mark(condition, &mut std::collections::HashSet::new(), &pinned);
}

impl CompiledLoop {
    /// Where `enter`'s value goes among [`CompiledLoop::enters`].
    pub fn enter_index(&self, enter: u32) -> Option<usize> {
        self.enters.iter().position(|&e| e == enter)
    }

    /// Runs one instance from its `Enter` values (in `enters` order) to
    /// the values of its `Exit`s (in `exits` order). `stop` is asked once
    /// per iteration (a failed or cancelled step).
    pub fn run(
        &self,
        executor: &Executor,
        enter_values: Vec<Option<Value>>,
        stop: &dyn Fn() -> Option<Status>,
    ) -> Result<Vec<Option<Value>>> {
        let mut regs: Vec<Option<Value>> = vec![None; self.num_regs];
        for (reg, value) in regs.iter_mut().zip(enter_values) {
            *reg = value;
        }
        for var in &self.vars {
            regs[var.reg as usize] = regs[var.enter as usize].take();
        }
        let mut next: SmallVec<[Option<Value>; 4]> = SmallVec::new();
        loop {
            self.execute(&self.condition, executor, &mut regs)?;
            if !self.holds(&regs)? {
                break;
            }
            self.execute(&self.body, executor, &mut regs)?;
            // The update is the last read of the `NextIteration` values:
            // each moves (a kernel then finds its input uniquely owned and
            // writes in place), unless two variables take the same one.
            next.clear();
            for (k, var) in self.vars.iter().enumerate() {
                let shared = self.vars[..k].iter().position(|v| v.next == var.next);
                next.push(match shared {
                    Some(j) => next[j].clone(),
                    None => regs[var.next as usize].take(),
                });
            }
            for (var, value) in self.vars.iter().zip(next.drain(..)) {
                regs[var.reg as usize] = value;
            }
            if let Some(status) = stop() {
                return Err(status);
            }
        }
        Ok(self.exits.iter().map(|&(_, reg)| regs[reg as usize].clone()).collect())
    }

    fn holds(&self, regs: &[Option<Value>]) -> Result<bool> {
        match &regs[self.predicate as usize] {
            Some(Value::Tensor(t)) => t.scalar_value::<bool>().map_err(|e| {
                e.context(format_args!("the LoopCond of loop frame '{}' (a bool scalar)", self.frame_name))
            }),
            _ => Err(Status::internal(format!("loop frame '{}': no predicate value", self.frame_name))),
        }
    }

    #[inline]
    fn execute(&self, program: &[Instr], executor: &Executor, regs: &mut [Option<Value>]) -> Result<()> {
        for instr in program {
            match instr {
                Instr::Const { value, reg } => regs[*reg as usize] = Some(value.clone()),
                Instr::Kernel { id, inputs, lent, outputs, scalar: Some(op), .. }
                    if outputs[0].is_some() && scalar_step(*op, inputs, lent, outputs, regs) => {}
                Instr::Kernel { id, inputs, lent, outputs, .. } => {
                    // Most kernels have few inputs and outputs: stack arrays.
                    const SMALL: usize = 4;
                    let hot = &executor.plan.hot[*id as usize];
                    let read = |input: &Input, regs: &mut [Option<Value>]| match input.reg {
                        Some(r) if input.take => regs[r as usize].take(),
                        Some(r) => regs[r as usize].clone(),
                        None => None,
                    };
                    if inputs.len() <= SMALL && outputs.len() <= SMALL {
                        let mut args: [Option<Value>; SMALL] = Default::default();
                        for (arg, input) in args.iter_mut().zip(inputs.iter()) {
                            *arg = read(input, regs);
                        }
                        let mut results: [Option<Value>; SMALL] = Default::default();
                        let (args, results) = (&mut args[..inputs.len()], &mut results[..outputs.len()]);
                        call_kernel_lending(executor, *id, hot, args, lent, results)?;
                        store(results, outputs, regs);
                    } else {
                        let mut args: Vec<Option<Value>> = inputs.iter().map(|input| read(input, regs)).collect();
                        let mut results: Vec<Option<Value>> = vec![None; outputs.len()];
                        call_kernel_lending(executor, *id, hot, &mut args, lent, &mut results)?;
                        store(&mut results, outputs, regs);
                    }
                }
            }
        }
        Ok(())
    }
}

/// A kernel's outputs into their registers.
#[inline]
fn store(results: &mut [Option<Value>], to: &[Option<u32>], regs: &mut [Option<Value>]) {
    for (value, reg) in results.iter_mut().zip(to) {
        if let Some(reg) = reg {
            regs[*reg as usize] = value.take();
        }
    }
}

/// Binary ops a loop's counters and predicates are made of, computed in
/// place on rank-0 operands (the kernels' own element functions, so the
/// results are the kernels'); anything else goes to the kernel.
#[derive(Clone, Copy, Debug)]
enum ScalarOp {
    Add,
    Sub,
    Mul,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
}

impl ScalarOp {
    fn of(op: &str) -> Option<ScalarOp> {
        Some(match op {
            "AddV2" | "Add" => ScalarOp::Add,
            "Sub" => ScalarOp::Sub,
            "Mul" => ScalarOp::Mul,
            "Less" => ScalarOp::Less,
            "LessEqual" => ScalarOp::LessEqual,
            "Greater" => ScalarOp::Greater,
            "GreaterEqual" => ScalarOp::GreaterEqual,
            _ => return None,
        })
    }

    fn apply<T: Num>(self, a: T, b: T) -> Scalar {
        use crate::ops::math::{self, Binary, Compare};
        match self {
            ScalarOp::Add => Scalar::of(<math::Add as Binary<T>>::apply(a, b)),
            ScalarOp::Sub => Scalar::of(<math::Sub as Binary<T>>::apply(a, b)),
            ScalarOp::Mul => Scalar::of(<math::Mul as Binary<T>>::apply(a, b)),
            ScalarOp::Less => Scalar::Bool(math::Less::apply(a, b)),
            ScalarOp::LessEqual => Scalar::Bool(math::LessEqual::apply(a, b)),
            ScalarOp::Greater => Scalar::Bool(math::Greater::apply(a, b)),
            ScalarOp::GreaterEqual => Scalar::Bool(math::GreaterEqual::apply(a, b)),
        }
    }
}

/// A computed rank-0 value.
#[derive(Clone, Copy)]
enum Scalar {
    F32(f32),
    F64(f64),
    I32(i32),
    I64(i64),
    Bool(bool),
}

impl Scalar {
    fn of<T: Num>(v: T) -> Scalar {
        let any: &dyn std::any::Any = &v;
        if let Some(&x) = any.downcast_ref::<f32>() {
            Scalar::F32(x)
        } else if let Some(&x) = any.downcast_ref::<f64>() {
            Scalar::F64(x)
        } else if let Some(&x) = any.downcast_ref::<i32>() {
            Scalar::I32(x)
        } else if let Some(&x) = any.downcast_ref::<i64>() {
            Scalar::I64(x)
        } else {
            unreachable!("Num is implemented for f32, f64, i32 and i64 only")
        }
    }

    fn dtype(self) -> DType {
        match self {
            Scalar::F32(_) => DType::F32,
            Scalar::F64(_) => DType::F64,
            Scalar::I32(_) => DType::I32,
            Scalar::I64(_) => DType::I64,
            Scalar::Bool(_) => DType::Bool,
        }
    }

    /// This value as a rank-0 tensor, written into `reuse` when that is a
    /// uniquely owned rank-0 tensor of the same dtype.
    fn into_tensor(self, reuse: Option<Value>) -> Tensor {
        fn put<T: Element>(v: T, reuse: Option<Value>) -> Tensor {
            if let Some(Value::Tensor(mut t)) = reuse {
                if t.rank() == 0 {
                    if let Some(slot) = t.try_slice_mut::<T>() {
                        slot[0] = v;
                        return t;
                    }
                }
            }
            Tensor::scalar(v)
        }
        match self {
            Scalar::F32(v) => put(v, reuse),
            Scalar::F64(v) => put(v, reuse),
            Scalar::I32(v) => put(v, reuse),
            Scalar::I64(v) => put(v, reuse),
            Scalar::Bool(v) => put(v, reuse),
        }
    }
}

/// `op` of two rank-0 operands of one real dtype, or `None`.
fn scalar_of(op: ScalarOp, a: &Value, b: &Value) -> Option<Scalar> {
    let (Value::Tensor(a), Value::Tensor(b)) = (a, b) else { return None };
    if a.rank() != 0 || b.rank() != 0 || a.dtype() != b.dtype() {
        return None;
    }
    fn typed<T: Num>(op: ScalarOp, a: &Tensor, b: &Tensor) -> Option<Scalar> {
        Some(op.apply(*a.as_slice::<T>().ok()?.first()?, *b.as_slice::<T>().ok()?.first()?))
    }
    match a.dtype() {
        DType::F32 => typed::<f32>(op, a, b),
        DType::F64 => typed::<f64>(op, a, b),
        DType::I32 => typed::<i32>(op, a, b),
        DType::I64 => typed::<i64>(op, a, b),
        _ => None,
    }
}

/// Runs a scalar op in place if its operands allow; false leaves every
/// register as it was, for the kernel.
#[inline]
fn scalar_step(
    op: ScalarOp,
    inputs: &[Input],
    lent: &[Option<Value>],
    outputs: &[Option<u32>],
    regs: &mut [Option<Value>],
) -> bool {
    let value = {
        let view = |i: usize| -> Option<&Value> {
            match inputs[i].reg {
                Some(r) => regs[r as usize].as_ref(),
                None => lent.get(i).and_then(Option::as_ref),
            }
        };
        match (view(0), view(1)) {
            (Some(a), Some(b)) => scalar_of(op, a, b),
            _ => None,
        }
    };
    let (Some(value), Some(out)) = (value, outputs[0]) else { return false };
    // The buffer to write: an operand at its last read, else what the
    // output register held from the last iteration, if of the result's
    // dtype (a comparison's bool never fits an operand).
    let mut reuse = None;
    for input in &inputs[..2] {
        if let (true, Some(r)) = (input.take, input.reg) {
            let taken = regs[r as usize].take();
            if reuse.is_none() && matches!(&taken, Some(Value::Tensor(t)) if t.dtype() == value.dtype()) {
                reuse = taken;
            }
        }
    }
    let previous = regs[out as usize].take();
    regs[out as usize] = Some(Value::Tensor(value.into_tensor(reuse.or(previous))));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::plan::Plan;
    use crate::graph::builder::counting_loop_graph;

    fn compiled_frames(graph: &crate::graph::GraphSpec) -> Vec<bool> {
        let plan = Plan::build(graph).unwrap();
        plan.control_flow.unwrap().compiled.iter().map(Option::is_some).collect()
    }

    #[test]
    fn a_while_loop_of_the_usual_shape_compiles_to_scalar_steps() {
        let plan = Plan::build(&counting_loop_graph(10)).unwrap();
        let cf = plan.control_flow.as_ref().unwrap();
        let compiled = cf.compiled[1].as_ref().expect("the counting loop compiles");
        // Less in the condition; both adds in the body, run as scalars;
        // the body's constants are lent, not copied into registers.
        assert_eq!(compiled.condition.len(), 1);
        assert_eq!(compiled.body.len(), 2);
        assert!(
            compiled.condition.iter().chain(&compiled.body).all(|i| matches!(i, Instr::Kernel { scalar: Some(_), .. }))
        );
        assert_eq!((compiled.vars.len(), compiled.exits.len(), compiled.enters.len()), (2, 2, 3));
    }

    #[test]
    fn a_loop_of_another_shape_keeps_the_general_executor() {
        // A control edge into a NextIteration is not the usual shape.
        let mut graph = counting_loop_graph(10);
        for node in &mut graph.nodes {
            if node.name == "loop/next_i" {
                node.control_inputs.push("loop/add_s".into());
            }
        }
        assert_eq!(compiled_frames(&graph), [false, false]);
        assert_eq!(compiled_frames(&counting_loop_graph(1)), [false, true]);
    }
}
