//! Running a partition: per step, atomic pending counters and input slots
//! over the immutable [`Plan`]; cheap kernels run inline on the thread that
//! made them ready (a chain never hops threads), expensive ones go to the
//! device's pool so independent branches run in parallel. Expensive means
//! large inputs, or a kernel that says this call is worth a thread once it
//! sees its inputs (a MatMul of 7×16 by 16×32 is not: a pool thread's
//! wake-up would cost more than the product).
//!
//! Owns: [`Executor`] (a plan, its device, its resources, a pool of reusable
//! per-step frames) and the scheduling loop. Must not know about sockets:
//! Send/Recv go through the step's `Rendezvous`.
//!
//! Why slots need no locks, and why a step always ends: README.md.

use super::barrier::StepDone;
use super::device::Device;
use super::outcome::Outcome;
use super::plan::{CONTROL_PORT, HotNode, LeavesTo, NodeKind, Plan, PlanNode};
use super::pool::ThreadPool;
use super::step::{Args, NodeStats, StepContext, arg_key};
use crate::error::{Result, Status};
use crate::graph::spec::GraphSpec;
use crate::ops::{OpContext, ResourceMgr, Value};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::cell::{Cell, UnsafeCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// Nodes whose inputs together exceed this many bytes are worth a thread hop.
pub const EXPENSIVE_INPUT_BYTES: usize = 256 * 1024;

/// How deep rendezvous callbacks may nest on one thread before the rest of
/// the work is handed to the pool (bounds the stack).
const MAX_INLINE_DEPTH: u32 = 8;

thread_local! {
    static INLINE_DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// One input slot. Written once by the producer before it decrements the
/// consumer's pending count; read by the consumer after the count hit zero.
/// Transparent, so a node's run of slots is its kernel's input slice.
#[repr(transparent)]
struct Slot(UnsafeCell<Option<Value>>);

// SAFETY: access follows the write-once-then-handoff protocol in README.md:
// a slot is only touched by its producer (before the AcqRel decrement) and
// then by its consumer (after the decrement that reached zero).
unsafe impl Sync for Slot {}

struct Frame {
    pending: Box<[AtomicU32]>,
    slots: Box<[Slot]>,
}

impl Frame {
    fn new(plan: &Plan) -> Frame {
        Frame {
            pending: plan.initial_pending.iter().map(|&p| AtomicU32::new(p)).collect(),
            slots: (0..plan.num_slots()).map(|_| Slot(UnsafeCell::new(None))).collect(),
        }
    }

    fn reset(&mut self, plan: &Plan) {
        for (p, &init) in self.pending.iter_mut().zip(&plan.initial_pending) {
            *p.get_mut() = init;
        }
    }

    /// The `n` input slots of the node whose inputs start at `base`.
    ///
    /// Only the node that owns them may call this, once its pending count
    /// has reached zero and before it completes (README.md): then nothing
    /// else reads or writes these slots, so the slice is exclusive.
    #[allow(clippy::mut_from_ref)]
    fn node_slots(&self, base: usize, n: usize) -> &mut [Option<Value>] {
        let slots = &self.slots[base..base + n];
        // SAFETY: `Slot` is a transparent `UnsafeCell<Option<Value>>`, which
        // has the layout of `Option<Value>`, so the run of slots is a run of
        // options; the cells permit writes through a shared borrow, and the
        // owner-only protocol above makes this borrow the only one.
        unsafe {
            std::slice::from_raw_parts_mut(UnsafeCell::raw_get(slots.as_ptr().cast::<UnsafeCell<Option<Value>>>()), n)
        }
    }

    /// A ready node's input slots, read by the thread that made it ready
    /// before handing it out: its producers are done and its consumer has
    /// not started, so nobody writes them meanwhile.
    fn ready_slots(&self, base: usize, n: usize) -> &[Option<Value>] {
        let slots = &self.slots[base..base + n];
        // SAFETY: as in `node_slots`, the slots are a run of options; the
        // protocol above makes a shared view sound.
        unsafe {
            std::slice::from_raw_parts(UnsafeCell::raw_get(slots.as_ptr().cast::<UnsafeCell<Option<Value>>>()), n)
        }
    }

    fn clear_slots(&mut self) {
        for slot in self.slots.iter_mut() {
            *slot.0.get_mut() = None;
        }
    }
}

/// Runs one partition graph, step after step (concurrent steps welcome).
pub struct Executor {
    pub(super) plan: Plan,
    pub(super) device: Arc<Device>,
    resources: Arc<ResourceMgr>,
    /// Recycled step frames. Boxed: a frame moves between this list and its
    /// step many times a second, and a box moves as one pointer.
    #[allow(clippy::vec_box)]
    frames: Mutex<Vec<Box<Frame>>>,
}

impl Executor {
    /// Builds the plan and the kernels of `graph` for `device`.
    pub fn new(graph: &GraphSpec, device: Arc<Device>, resources: Arc<ResourceMgr>) -> Result<Arc<Executor>> {
        let plan = Plan::build(graph)?;
        Ok(Arc::new(Executor { plan, device, resources, frames: Mutex::new(Vec::new()) }))
    }

    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    pub fn num_nodes(&self) -> usize {
        self.plan.nodes.len()
    }

    /// Starts a step on the calling thread; `done` runs once, when the
    /// partition has finished (possibly before this returns).
    pub fn run_async(self: &Arc<Self>, step: Arc<StepContext>, done: StepDone) {
        if self.plan.control_flow.is_some() {
            super::control_flow::run_async(self, step, done);
            return;
        }
        let mut frame = self.frames.lock().pop().unwrap_or_else(|| Box::new(Frame::new(&self.plan)));
        frame.reset(&self.plan);
        if self.plan.nodes.is_empty() {
            done(Ok(()));
            self.frames.lock().push(frame);
            return;
        }
        let exec = Arc::new(Execution {
            executor: self.clone(),
            step,
            frame: Some(frame),
            outstanding: AtomicUsize::new(self.plan.roots.len()),
            outcome: Outcome::new(done),
        });
        let mut stack: SmallVec<[u32; 16]> = SmallVec::new();
        exec.dispatch(&self.plan.roots, &mut stack);
        exec.drain(&mut stack);
    }
}

struct Execution {
    executor: Arc<Executor>,
    step: Arc<StepContext>,
    /// Always `Some` until `Drop` hands it back to the executor.
    frame: Option<Box<Frame>>,
    outstanding: AtomicUsize,
    outcome: Outcome,
}

impl Drop for Execution {
    fn drop(&mut self) {
        if let Some(mut frame) = self.frame.take() {
            // The last reference is gone: nothing else can touch the frame.
            if self.outcome.failed() || self.step.is_cancelled() {
                frame.clear_slots();
            }
            self.executor.frames.lock().push(frame);
        }
    }
}

impl Execution {
    fn plan(&self) -> &Plan {
        &self.executor.plan
    }

    fn frame(&self) -> &Frame {
        self.frame.as_deref().expect("frame present until drop")
    }

    /// Takes the value in input slot `slot` (a copy, for a bound constant).
    fn take_slot(&self, slot: u32) -> Option<Value> {
        if let Some(constant) = &self.plan().slot_const[slot as usize] {
            return Some(constant.clone());
        }
        // SAFETY: called only by the node that owns the slot, after its
        // pending count reached zero (README.md).
        unsafe { (*self.frame().slots[slot as usize].0.get()).take() }
    }

    /// Hands out ready nodes (already counted in `outstanding`): expensive
    /// ones to the device pool, cheap ones to `stack` (run by this thread).
    fn dispatch(self: &Arc<Self>, ready: &[u32], stack: &mut SmallVec<[u32; 16]>) {
        let mut expensive = Ready::default();
        for &tagged in ready {
            let id = tagged & COUNT_MASK;
            if self.goes_to_pool(id, tagged) {
                expensive.push(id);
            } else {
                stack.push(id);
            }
        }
        self.hand_to_pool(expensive.as_slice(), stack, ready.len() > expensive.len());
    }

    /// Whether ready node `id` (its pending word `flags`) runs on the pool
    /// rather than on this thread: large inputs, or an expensive kernel
    /// with enough work this time.
    #[inline(always)]
    fn goes_to_pool(&self, id: u32, flags: u32) -> bool {
        flags & BIG_INPUT != 0 || (self.plan().hot[id as usize].has(HotNode::EXPENSIVE) && self.worth_a_thread(id))
    }

    /// Whether an expensive kernel says its inputs this time repay a hop.
    #[inline(never)]
    fn worth_a_thread(&self, id: u32) -> bool {
        let plan = self.plan();
        let hot = &plan.hot[id as usize];
        let NodeKind::Kernel { kernel } = &plan.nodes[id as usize].kind else { return true };
        let (base, n) = (hot.input_base as usize, hot.num_inputs as usize);
        kernel.worth_a_thread(self.frame().ready_slots(base, n), self.lent_inputs(hot))
    }

    /// Spawns expensive ready nodes on the device pool. A pool thread that
    /// made no cheap node ready keeps the last one for itself: with nothing
    /// else to do, a hop would only add latency.
    #[inline]
    fn hand_to_pool(self: &Arc<Self>, expensive: &[u32], stack: &mut SmallVec<[u32; 16]>, made_cheap: bool) {
        let Some((&last, rest)) = expensive.split_last() else { return };
        let pool = &self.executor.device.pool;
        for &id in rest {
            self.spawn_node(id);
        }
        if !made_cheap && pool.on_pool_thread() { stack.push(last) } else { self.spawn_node(last) }
    }

    fn spawn_node(self: &Arc<Self>, id: u32) {
        let exec = self.clone();
        self.executor.device.pool.spawn(move || {
            let mut stack = SmallVec::new();
            stack.push(id);
            exec.drain(&mut stack);
        });
    }

    /// Runs nodes from `stack` until it is empty.
    fn drain(self: &Arc<Self>, stack: &mut SmallVec<[u32; 16]>) {
        while let Some(mut id) = stack.pop() {
            // A node that made exactly one cheap successor ready hands it
            // back to run next, as the stack would, without going through it.
            while let Some(next) = self.run_node(id, stack) {
                id = next;
            }
        }
    }

    /// A node finished and made nothing ready.
    fn node_done(&self) {
        if self.outstanding.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.outcome.finish(&self.step);
        }
    }

    /// Runs node `id`; returns the successor to run next when it made
    /// exactly one cheap node ready and nothing else (see `hand_on`).
    #[inline]
    fn run_node(self: &Arc<Self>, id: u32, stack: &mut SmallVec<[u32; 16]>) -> Option<u32> {
        let hot = &self.plan().hot[id as usize];
        if self.outcome.failed() || self.step.is_cancelled() {
            self.node_done();
            return None;
        }
        let start_us = self.step.collects_stats().then(|| self.step.stats_clock_us());
        if !hot.has(HotNode::KERNEL) {
            self.run_builtin(id, start_us, stack);
            return None;
        }
        if hot.num_outputs > 2 {
            self.run_wide_kernel(id, hot, start_us, stack);
            return None;
        }
        let mut buffer = [None, None];
        let outputs = &mut buffer[..hot.num_outputs as usize];
        let result = self.compute(id, hot, outputs);
        if let Some(start_us) = start_us {
            self.record(&self.plan().nodes[id as usize], start_us);
        }
        match result {
            Ok(()) if hot.num_edges == 1 && hot.num_outputs == 1 => self.hand_on(id, hot, outputs, stack),
            Ok(()) => {
                self.complete(id, Ok(Outputs::from_slice(outputs)), stack);
                None
            }
            Err(e) => {
                self.complete(id, Err(e), stack);
                None
            }
        }
    }

    /// A kernel with more than two outputs: its outputs on the heap.
    #[inline(never)]
    fn run_wide_kernel(
        self: &Arc<Self>,
        id: u32,
        hot: &HotNode,
        start_us: Option<u64>,
        stack: &mut SmallVec<[u32; 16]>,
    ) {
        let mut outputs = Outputs::new(hot.num_outputs as usize);
        let result = self.compute(id, hot, outputs.as_mut_slice());
        if let Some(start_us) = start_us {
            self.record(&self.plan().nodes[id as usize], start_us);
        }
        self.complete(id, result.map(|()| outputs), stack);
    }

    /// `complete` for a node with one output and one out edge, the
    /// commonest shape (every link of a chain): the value goes straight
    /// into its consumer's slot, and a consumer made ready inherits this
    /// node's count in `outstanding`.
    #[inline]
    fn hand_on(
        self: &Arc<Self>,
        id: u32,
        hot: &HotNode,
        outputs: &mut [Option<Value>],
        stack: &mut SmallVec<[u32; 16]>,
    ) -> Option<u32> {
        let edge = self.plan().edges[hot.first_edge as usize];
        if edge.port == CONTROL_PORT {
            self.complete(id, Ok(Outputs::from_slice(outputs)), stack);
            return None;
        }
        let Some(value) = outputs[0].take() else {
            self.complete(id, Ok(Outputs::new(1)), stack);
            return None;
        };
        let frame = self.frame();
        let big = matches!(&value, Value::Tensor(t) if t.byte_len() > EXPENSIVE_INPUT_BYTES);
        // SAFETY: this node is the only producer of `edge.slot`, and the
        // consumer cannot run before the decrement below.
        let slot = unsafe { &mut *frame.slots[edge.slot as usize].0.get() };
        debug_assert!(slot.is_none(), "slot {} written twice", edge.slot);
        *slot = Some(value);
        let pending = &frame.pending[edge.dst as usize];
        if big {
            pending.fetch_or(BIG_INPUT, Ordering::Release);
        }
        match last_producer(pending) {
            None => {
                self.node_done();
                None
            }
            Some(flags) if self.goes_to_pool(edge.dst, flags) => {
                self.hand_to_pool(&[edge.dst], stack, false);
                None
            }
            Some(_) => Some(edge.dst),
        }
    }

    /// Runs an `_Arg`, `_Retval`, `_Send` or `_Recv`.
    #[inline(never)]
    fn run_builtin(self: &Arc<Self>, id: u32, start_us: Option<u64>, stack: &mut SmallVec<[u32; 16]>) {
        let node = &self.plan().nodes[id as usize];
        // What a `_Send` sent, for its stats.
        let mut sent: Option<(&super::rendezvous::RendezvousKey, u64)> = None;
        let outputs: Result<Outputs> = match &node.kind {
            NodeKind::Kernel { .. } => Err(Status::internal(format!("{}: a kernel without its flag", node.describe()))),
            NodeKind::Arg(index) => match &self.step.frame.args {
                Args::Ready(values) => match values.get(*index).and_then(Option::as_ref) {
                    Some(v) => Ok(Outputs::one(v.clone())),
                    None => Err(Status::internal(format!("{}: no feed #{index}", node.describe()))),
                },
                Args::Partial => {
                    self.wait_for(id, &arg_key(*index));
                    return;
                }
            },
            NodeKind::Retval(index) => self
                .input_tensor(id, 0)
                .and_then(|t| self.step.frame.retvals.set(*index, Value::Tensor(t)))
                .map(|()| Outputs::new(0)),
            NodeKind::Send(key) => self
                .input_tensor(id, 0)
                .and_then(|t| {
                    sent = Some((key, t.byte_len() as u64));
                    self.step.rendezvous.send(key, Value::Tensor(t))
                })
                .map(|()| Outputs::new(0)),
            NodeKind::Recv(key) => {
                self.wait_for(id, key);
                return;
            }
            _ => Err(Status::internal(format!("{}: control flow outside the control-flow executor", node.describe()))),
        };
        if let Some(start_us) = start_us {
            self.record_transfer(node, start_us, sent);
        }
        self.complete(id, outputs, stack);
    }

    fn record(&self, node: &PlanNode, start_us: u64) {
        self.record_transfer(node, start_us, None);
    }

    /// `record`, for a `_Send`/`_Recv` with the key and bytes it moved.
    fn record_transfer(
        &self,
        node: &PlanNode,
        start_us: u64,
        transfer: Option<(&super::rendezvous::RendezvousKey, u64)>,
    ) {
        let (rendezvous_key, bytes) = transfer.map_or((String::new(), 0), |(k, b)| (k.as_str().to_string(), b));
        self.step.record(NodeStats {
            node: node.name.clone(),
            op: node.op.clone(),
            device: self.executor.device.name_str.clone(),
            start_us,
            end_us: self.step.stats_clock_us(),
            thread: thread_number(),
            frame: String::new(),
            iter: 0,
            rendezvous_key,
            bytes,
        });
    }

    /// Input `i` of node `id` as a tensor (reading through a ref).
    fn input_tensor(&self, id: u32, i: u32) -> Result<crate::tensor::Tensor> {
        let node = &self.plan().nodes[id as usize];
        let slot = self.plan().hot[id as usize].input_base + i;
        match self.take_slot(slot) {
            Some(v) => v.into_tensor().map_err(|e| e.context(node.describe())),
            None => Err(Status::internal(format!("{}: input {i} missing", node.describe()))),
        }
    }

    /// The bound constants among a node's inputs, by input index (empty
    /// when it has none).
    #[inline]
    fn lent_inputs(&self, hot: &HotNode) -> &[Option<Value>] {
        self.plan().lent_inputs(hot)
    }

    #[inline]
    fn compute(&self, id: u32, hot: &HotNode, outputs: &mut [Option<Value>]) -> Result<()> {
        // The node's own input slots are its kernel's inputs: no copy into
        // an argument array. Bound constants are lent from the plan; their
        // slots stay empty.
        let inputs = self.frame().node_slots(hot.input_base as usize, hot.num_inputs as usize);
        let result = compute_kernel_for(&self.executor, &self.step, id, hot, inputs, outputs);
        // What the kernel did not take dies with its execution, as it would
        // in an argument array.
        inputs.iter_mut().for_each(|i| drop(i.take()));
        result
    }

    /// Registers `id` (a Recv or a partial-run Arg) with the rendezvous; the
    /// node finishes when the value (or an abort) arrives.
    fn wait_for(self: &Arc<Self>, id: u32, key: &super::rendezvous::RendezvousKey) {
        let exec = self.clone();
        // A waiting node's time is its wait: from here to the value's arrival.
        let start_us = self.step.collects_stats().then(|| self.step.stats_clock_us());
        // Only a traced step pays for keeping the key (its stats name it).
        let traced_key = start_us.map(|_| key.clone());
        self.step.rendezvous.recv_async(
            key,
            Box::new(move |result| {
                let depth = INLINE_DEPTH.with(|d| d.get());
                if let Some(start_us) = start_us {
                    let node = &exec.plan().nodes[id as usize];
                    let transfer = traced_key
                        .as_ref()
                        .filter(|_| matches!(node.kind, NodeKind::Recv(_)))
                        .map(|k| (k, super::step::received_bytes(&result)));
                    exec.record_transfer(node, start_us, transfer);
                }
                if depth >= MAX_INLINE_DEPTH {
                    let pool = exec.executor.device.pool.clone();
                    pool.spawn(move || exec.complete_wait(id, result));
                } else {
                    INLINE_DEPTH.with(|d| d.set(depth + 1));
                    exec.complete_wait(id, result);
                    INLINE_DEPTH.with(|d| d.set(depth));
                }
            }),
        );
    }

    /// The value a waiting node was waiting for arrived (or the step aborted).
    fn complete_wait(self: &Arc<Self>, id: u32, result: Result<Value>) {
        let node = &self.plan().nodes[id as usize];
        let mut stack: SmallVec<[u32; 16]> = SmallVec::new();
        let outputs = match result {
            // The partitioner gives a partition that may receive one the
            // control-flow executor (a `_Recv` marked `_dead_ok`).
            Ok(Value::Dead) => Err(Status::internal(format!(
                "{}: received a dead value in a partition without control flow",
                node.describe()
            ))),
            result => result.map(Outputs::one).map_err(|e| e.context(node.describe())),
        };
        self.complete(id, outputs, &mut stack);
        self.drain(&mut stack);
    }

    /// Node `id` finished with `outputs`: hands them to its successors,
    /// accounts the ones that became ready and dispatches them: cheap ones
    /// straight onto `stack`, expensive ones to the pool.
    ///
    /// `outstanding` changes by (ready - 1): a node with exactly one ready
    /// successor hands its count over, so a chain touches no shared counter.
    /// The count is raised before any successor is handed to another thread
    /// (nodes on `stack` are this thread's until it pops them).
    fn complete(self: &Arc<Self>, id: u32, outputs: Result<Outputs>, stack: &mut SmallVec<[u32; 16]>) {
        let mut expensive = Ready::default();
        let made_cheap = match outputs {
            Ok(outputs) => self.propagate(id, outputs, stack, &mut expensive),
            Err(e) => {
                self.outcome.fail(e, &self.step);
                0
            }
        };
        match made_cheap + expensive.len() {
            0 => self.node_done(),
            1 => {}
            n => {
                self.outstanding.fetch_add(n - 1, Ordering::AcqRel);
            }
        }
        self.hand_to_pool(expensive.as_slice(), stack, made_cheap > 0);
    }

    /// Hands `outputs` to the successors of `id`. Those that became ready
    /// go onto `stack` when cheap, into `expensive` otherwise; returns how
    /// many went onto `stack`.
    fn propagate(
        &self,
        id: u32,
        mut outputs: Outputs,
        stack: &mut SmallVec<[u32; 16]>,
        expensive: &mut Ready,
    ) -> usize {
        let plan = self.plan();
        let hot = &plan.hot[id as usize];
        let outputs = outputs.as_mut_slice();
        if let Some(missing) = outputs.iter().position(Option::is_none) {
            let node = &plan.nodes[id as usize];
            self.outcome
                .fail(Status::internal(format!("{}: output {missing} was not set", node.describe())), &self.step);
            return 0;
        }
        let frame = self.frame();
        let mut made_cheap = 0;
        let mut ready = |dst: u32, flags: u32| {
            if self.goes_to_pool(dst, flags) {
                expensive.push(dst);
            } else {
                stack.push(dst);
                made_cheap += 1;
            }
        };
        let edges = &plan.edges[hot.first_edge as usize..][..hot.num_edges as usize];
        for (i, edge) in edges.iter().enumerate() {
            if edge.port == CONTROL_PORT {
                if let Some(flags) = last_producer(&frame.pending[edge.dst as usize]) {
                    ready(edge.dst, flags);
                }
                continue;
            }
            let last_of_port = edges.get(i + 1).is_none_or(|next| next.port != edge.port);
            let value =
                if last_of_port { outputs[edge.port as usize].take() } else { outputs[edge.port as usize].clone() };
            let big = matches!(&value, Some(Value::Tensor(t)) if t.byte_len() > EXPENSIVE_INPUT_BYTES);
            // SAFETY: this node is the only producer of `edge.slot`, and the
            // consumer cannot run before the decrement below.
            let slot = unsafe { &mut *frame.slots[edge.slot as usize].0.get() };
            // Empty: its consumer took it last step, or a failed step's
            // frame was cleared before reuse.
            debug_assert!(slot.is_none(), "slot {} written twice", edge.slot);
            *slot = value;
            let pending = &frame.pending[edge.dst as usize];
            if big {
                pending.fetch_or(BIG_INPUT, Ordering::Release);
            }
            if let Some(flags) = last_producer(pending) {
                ready(edge.dst, flags);
            }
        }
        made_cheap
    }
}

/// [`compute_kernel`] in `step`: a kernel whose output a `_Send` sends may
/// write it where the send reads it (the rendezvous says where), and one
/// whose output a `_Retval` returns where the step's caller will be
/// answered (the call frame says where; see `tensor::placement`).
#[inline]
pub(super) fn compute_kernel_for(
    executor: &Executor,
    step: &StepContext,
    id: u32,
    hot: &HotNode,
    inputs: &mut [Option<Value>],
    outputs: &mut [Option<Value>],
) -> Result<()> {
    use crate::tensor::placement::place_outputs;
    let leaves_to = match hot.has(HotNode::OUTPUT_LEAVES) {
        true => executor.plan.nodes[id as usize].leaves_to.as_ref(),
        false => None,
    };
    // Memory is asked for only when the kernel builds a tensor worth
    // placing: most outputs that leave are small, and then this costs a
    // thread-local store and load.
    match (leaves_to, &step.frame.retval_placement) {
        (Some(LeavesTo::Device(device)), _) => {
            place_outputs(&TowardDevice { rendezvous: &*step.rendezvous, device }, || {
                compute_kernel(executor, id, hot, inputs, outputs)
            })
        }
        (Some(LeavesTo::Caller), Some(placement)) => {
            place_outputs(&**placement, || compute_kernel(executor, id, hot, inputs, outputs))
        }
        _ => compute_kernel(executor, id, hot, inputs, outputs),
    }
}

/// Placement in whatever memory the step's rendezvous offers toward a
/// receiving device.
struct TowardDevice<'a> {
    rendezvous: &'a dyn super::Rendezvous,
    device: &'a str,
}

impl crate::tensor::placement::OutputPlacement for TowardDevice<'_> {
    fn place(&self, len: usize) -> Option<crate::tensor::placement::PlacedBytes> {
        self.rendezvous.output_placement(self.device)?.place(len)
    }
}

/// Runs node `id`'s kernel on `inputs` (its input slots, bound constants
/// lent from the plan), reading through refs first where the plan says so.
/// Errors and panics come back naming the node.
#[inline]
pub(super) fn compute_kernel(
    executor: &Executor,
    id: u32,
    hot: &HotNode,
    inputs: &mut [Option<Value>],
    outputs: &mut [Option<Value>],
) -> Result<()> {
    if hot.has(HotNode::DEREF_INPUTS) {
        read_refs(executor, id, hot, inputs).and_then(|()| call_kernel(executor, id, hot, inputs, outputs))
    } else {
        call_kernel(executor, id, hot, inputs, outputs)
    }
}

/// Replaces each input read through a ref by the variable's value.
#[inline(never)]
fn read_refs(executor: &Executor, id: u32, hot: &HotNode, inputs: &mut [Option<Value>]) -> Result<()> {
    let base = hot.input_base as usize;
    for (input, &deref) in inputs.iter_mut().zip(&executor.plan.slot_deref[base..]) {
        if let (true, Some(Value::Ref(var))) = (deref, &*input) {
            let value = var.read().map_err(|e| e.context(executor.plan.nodes[id as usize].describe()))?;
            *input = Some(Value::Tensor(value));
        }
    }
    Ok(())
}

#[cold]
fn kernel_error(executor: &Executor, id: u32, e: Status) -> Status {
    e.context(executor.plan.nodes[id as usize].describe())
}

#[inline]
fn call_kernel(
    executor: &Executor,
    id: u32,
    hot: &HotNode,
    inputs: &mut [Option<Value>],
    outputs: &mut [Option<Value>],
) -> Result<()> {
    call_kernel_lending(executor, id, hot, inputs, executor.plan.lent_inputs(hot), outputs)
}

/// Calls node `id`'s kernel with `lent[i]`, when set, standing for input
/// `i` (constants the caller keeps).
#[inline]
pub(super) fn call_kernel_lending(
    executor: &Executor,
    id: u32,
    hot: &HotNode,
    inputs: &mut [Option<Value>],
    lent: &[Option<Value>],
    outputs: &mut [Option<Value>],
) -> Result<()> {
    let resources: &ResourceMgr = &executor.resources;
    let result = catch_unwind(AssertUnwindSafe(|| {
        let pool: &ThreadPool = &executor.device.pool;
        let mut ctx = OpContext::with_lent(inputs, lent, outputs, resources).with_intra_op(pool);
        match hot.compute {
            Some(compute) => compute(&mut ctx),
            None => match &executor.plan.nodes[id as usize].kind {
                NodeKind::Kernel { kernel } => kernel.compute(&mut ctx),
                _ => Err(Status::internal("a node flagged as a kernel holds none")),
            },
        }
    }));
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(kernel_error(executor, id, e)),
        Err(panic) => Err(kernel_panic(executor, id, panic)),
    }
}

#[cold]
fn kernel_panic(executor: &Executor, id: u32, panic: Box<dyn std::any::Any + Send>) -> Status {
    let node = &executor.plan.nodes[id as usize];
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    Status::internal(format!("{}: kernel panicked: {what}", node.describe()))
}

/// A node's outputs: up to two inline (nearly every op), more on the heap.
enum Outputs {
    Inline([Option<Value>; 2], u8),
    Heap(Vec<Option<Value>>),
}

impl Outputs {
    fn new(n: usize) -> Outputs {
        if n <= 2 { Outputs::Inline([None, None], n as u8) } else { Outputs::Heap((0..n).map(|_| None).collect()) }
    }

    /// Moves the values out of `values`.
    fn from_slice(values: &mut [Option<Value>]) -> Outputs {
        let mut outputs = Outputs::new(values.len());
        for (to, from) in outputs.as_mut_slice().iter_mut().zip(values) {
            *to = from.take();
        }
        outputs
    }

    fn one(value: Value) -> Outputs {
        Outputs::Inline([Some(value), None], 1)
    }

    fn as_mut_slice(&mut self) -> &mut [Option<Value>] {
        match self {
            Outputs::Inline(values, n) => &mut values[..*n as usize],
            Outputs::Heap(values) => values,
        }
    }
}

/// Successors made ready by one node: up to eight inline, more on the heap.
#[derive(Default)]
struct Ready {
    inline: [u32; 8],
    len: usize,
    spill: Vec<u32>,
}

impl Ready {
    #[inline]
    fn push(&mut self, id: u32) {
        if self.len < self.inline.len() {
            self.inline[self.len] = id;
            self.len += 1;
        } else {
            if self.spill.is_empty() {
                self.spill.extend_from_slice(&self.inline);
            }
            self.spill.push(id);
            self.len += 1;
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn as_slice(&self) -> &[u32] {
        if self.spill.is_empty() { &self.inline[..self.len] } else { &self.spill }
    }
}

/// Counts one producer of a node off; true for the last one.
///
/// A count that reads 1 needs no write: every other producer has already
/// decremented (counts only fall, one per producer edge), so the caller is
/// the last, and nobody touches the counter again this step. The Acquire
/// load synchronises with their release decrements just as the RMW would.
///
/// Returns the counter's flags as the last producer saw them: a producer
/// of a large tensor sets [`BIG_INPUT`] before its own decrement, so the
/// last one sees every such mark.
#[inline]
fn last_producer(pending: &AtomicU32) -> Option<u32> {
    let seen = pending.load(Ordering::Acquire);
    if seen & COUNT_MASK == 1 {
        return Some(seen);
    }
    let before = pending.fetch_sub(1, Ordering::AcqRel);
    (before & COUNT_MASK == 1).then_some(before)
}

/// Set in a pending count (and in a ready node's id) when some input is
/// larger than [`EXPENSIVE_INPUT_BYTES`]: the node is worth a thread hop.
const BIG_INPUT: u32 = 1 << 31;
const COUNT_MASK: u32 = !BIG_INPUT;

/// A small stable number for the current thread, for stats.
pub(super) fn thread_number() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    thread_local! {
        static ID: u32 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    ID.with(|id| *id)
}
