//! Ops and kernels: what each op takes and gives ([`OpSignature`]), and the
//! code that computes it ([`OpKernel`]).
//!
//! Owns: the op registry ([`registry`]), the values that flow on edges
//! ([`Value`]), per-device resource containers ([`resource`]), and every
//! kernel. Must not know about scheduling, devices' threads, rendezvous or
//! the network: the executor hands a kernel its inputs and takes its outputs.
//!
//! A kernel is built once per registered graph (not per step) from its
//! [`NodeSpec`], so attribute parsing and constant decoding happen once.
//! Kernels return plain errors (`Incompatible shapes: [2,3] vs. [4]`); the
//! executor prefixes the node and op.

pub mod array;
pub mod broadcast;
pub mod control_flow;
mod fast_math;
#[cfg(test)]
mod golden_tests;
pub mod image;
pub mod io;
pub mod linalg;
pub mod list;
pub mod logging;
pub mod lookup;
pub mod math;
pub mod matmul;
pub mod nn;
pub mod numeric;
pub mod ragged;
pub mod random;
pub mod reduce;
pub mod registry;
pub mod resource;
pub mod shape_ops;
pub mod signal;
pub mod sparse;
pub mod string;
#[cfg(test)]
pub mod test_kernels;
pub mod training;
pub mod variable;
pub mod widen;

pub use list::TensorList;
pub use registry::{Builtin, Implementation, OpDef, lookup};
pub use resource::{ResourceHandle, ResourceMgr, Variable};

use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Tensor};
use std::fmt;
use std::sync::Arc;

/// What flows along a data edge at run time.
#[derive(Clone)]
pub enum Value {
    Tensor(Tensor),
    /// A reference to a ref-typed variable (`VariableV2` and its consumers).
    Ref(Arc<Variable>),
    /// A handle to a resource variable (`VarHandleOp` and its consumers).
    Resource(Arc<ResourceHandle>),
    /// A TensorList (a `variant` edge): an immutable list of tensors that
    /// a kernel holding the only reference updates in place.
    List(Arc<TensorList>),
    /// A stack of control flow v1's loop gradients (`StackV2`'s handle,
    /// typed `resource` in the graph): the stack itself, alive for a step.
    Stack(Arc<control_flow::stack::Stack>),
    /// No value: what a `_Send` of a dead input (from an untaken branch,
    /// or a loop's last iteration) hands its `_Recv`, so the receiving
    /// partition sees the same deadness. Only rendezvous carry it; the
    /// control-flow executor turns it back into a dead output.
    Dead,
}

impl Value {
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The tensor this value stands for: a ref is read; a resource handle is
    /// not a tensor.
    pub fn into_tensor(self) -> Result<Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            Value::Ref(var) => var.read(),
            Value::Resource(h) => {
                Err(Status::invalid_argument(format!("resource handle to variable '{}' is not a tensor", h.name)))
            }
            Value::List(l) => Err(Status::invalid_argument(format!(
                "a TensorList of {} ({} elements) is a variant, not a tensor",
                l.element_dtype(),
                l.len()
            ))),
            Value::Stack(s) => {
                Err(Status::invalid_argument(format!("the handle of Stack[{}] is not a tensor", s.name())))
            }
            Value::Dead => Err(Status::internal("a dead value (from an untaken branch) used as a tensor")),
        }
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Tensor(t) => write!(f, "{t:?}"),
            Value::Ref(v) => write!(f, "Ref({})", v.name()),
            Value::Resource(h) => write!(f, "Resource({}/{})", h.container, h.name),
            Value::List(l) => write!(f, "TensorList<{}>[{}]", l.element_dtype(), l.len()),
            Value::Stack(s) => write!(f, "Stack({})", s.name()),
            Value::Dead => f.write_str("Dead"),
        }
    }
}

/// The type of an edge: what a node's input accepts or its output gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    Tensor(DType),
    Ref(DType),
    Resource,
    /// TensorFlow's `variant`; the only variant this runtime carries is a
    /// TensorList ([`Value::List`]).
    Variant,
}

impl ValueType {
    /// Whether an output of type `self` may feed an input of type `input`:
    /// equal types, or a ref read as a tensor of its dtype.
    pub fn feeds(self, input: ValueType) -> bool {
        match (self, input) {
            (a, b) if a == b => true,
            (ValueType::Ref(d), ValueType::Tensor(e)) => d == e,
            _ => false,
        }
    }

    /// The type after reading through a ref.
    pub fn deref(self) -> ValueType {
        match self {
            ValueType::Ref(d) => ValueType::Tensor(d),
            other => other,
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueType::Tensor(d) => write!(f, "{d}"),
            ValueType::Ref(d) => write!(f, "{d}_ref"),
            ValueType::Resource => f.write_str("resource"),
            ValueType::Variant => f.write_str("variant"),
        }
    }
}

/// The input and output types of one node, resolved from its attributes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpSignature {
    pub inputs: Vec<ValueType>,
    pub outputs: Vec<ValueType>,
}

impl OpSignature {
    pub fn new(inputs: Vec<ValueType>, outputs: Vec<ValueType>) -> OpSignature {
        OpSignature { inputs, outputs }
    }
}

/// What a kernel is built from.
pub struct KernelInit<'a> {
    pub node: &'a NodeSpec,
    pub signature: &'a OpSignature,
}

/// The code of one node, built once per registered graph.
pub trait OpKernel: Send + Sync + 'static {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()>;

    /// True for kernels worth a trip to another thread (MatMul). The executor
    /// also treats any node with large inputs as expensive.
    fn is_expensive(&self) -> bool {
        false
    }

    /// Asked of an expensive kernel once its inputs are ready: whether this
    /// call has enough work to repay handing it to another thread (a
    /// wake-up there costs tens of microseconds). Input `i` is `inputs[i]`,
    /// or `lent[i]` for a constant bound at plan time.
    fn worth_a_thread(&self, inputs: &[Option<Value>], lent: &[Option<Value>]) -> bool {
        let _ = (inputs, lent);
        true
    }

    /// The whole kernel as one plain function, when it keeps no state: the
    /// executor then calls it directly instead of through the kernel.
    fn as_compute_fn(&self) -> Option<ComputeFn> {
        None
    }

    /// True for a kernel whose one output is its input 0, the same value
    /// (Identity and its kin): the plan looks through it to where that
    /// value goes.
    fn forwards_input(&self) -> bool {
        false
    }
}

/// The compute step of a kernel without per-node state: one monomorphised
/// function chosen at build time for the node's dtype, so a step pays one
/// indirect call and no dtype dispatch.
pub type ComputeFn = fn(&mut OpContext<'_>) -> Result<()>;

/// A kernel that is just a [`ComputeFn`].
pub struct FnKernel {
    pub compute: ComputeFn,
    pub expensive: bool,
}

impl FnKernel {
    pub fn boxed(compute: ComputeFn) -> Box<dyn OpKernel> {
        Box::new(FnKernel { compute, expensive: false })
    }
}

impl OpKernel for FnKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        (self.compute)(ctx)
    }

    fn as_compute_fn(&self) -> Option<ComputeFn> {
        Some(self.compute)
    }

    fn is_expensive(&self) -> bool {
        self.expensive
    }
}

/// The error for a dtype an op has no kernel for.
pub fn unsupported_dtype(op: &str, dtype: DType, supported: &[DType]) -> Status {
    let names: Vec<&str> = supported.iter().map(|d| d.name()).collect();
    Status::invalid_argument(format!("{op} does not support dtype {dtype} (supported: {})", names.join(", ")))
}

/// An optional list-of-ints attribute (`squeeze_dims`, ...).
pub fn attr_int_list_or(node: &NodeSpec, key: &str, default: &[i64]) -> Result<Vec<i64>> {
    use crate::graph::spec::{AttrList, AttrValue};
    match node.get_attr(key) {
        None => Ok(default.to_vec()),
        Some(AttrValue::List(AttrList::Int(v))) => Ok(v.clone()),
        // An empty list carries no element kind on the wire.
        Some(AttrValue::List(AttrList::Bytes(v))) if v.is_empty() => Ok(Vec::new()),
        Some(AttrValue::List(AttrList::Type(v))) if v.is_empty() => Ok(Vec::new()),
        Some(AttrValue::List(AttrList::Float(v))) if v.is_empty() => Ok(Vec::new()),
        Some(other) => Err(Status::invalid_argument(format!(
            "node '{}' ({}): attr '{key}' should be a list of ints, got {other:?}",
            node.name, node.op
        ))),
    }
}

/// The `N` attribute of ops with a variable number of inputs, at least `min`.
pub fn attr_count(node: &NodeSpec, key: &str, min: usize) -> Result<usize> {
    let n = node.attr_int(key)?;
    match usize::try_from(n) {
        Ok(n) if n >= min => Ok(n),
        _ => Err(Status::invalid_argument(format!(
            "node '{}' ({}): attr '{key}' is {n}, must be at least {min}",
            node.name, node.op
        ))),
    }
}

/// The elements of an int32 or int64 tensor (a shape, axes, a
/// permutation) as i64; `what` names the operand in errors.
pub fn index_values(t: &Tensor, what: &str) -> Result<smallvec::SmallVec<[i64; 8]>> {
    match t.dtype() {
        DType::I32 => Ok(t.as_slice::<i32>()?.iter().map(|&v| v as i64).collect()),
        DType::I64 => Ok(t.as_slice::<i64>()?.iter().copied().collect()),
        other => Err(Status::invalid_argument(format!("{what} must be int32 or int64, got {other}"))),
    }
}

/// An index-typed attribute (`Tidx`, `Tshape`, `Tperm`, ...): int32 or
/// int64, with a default when absent.
pub fn attr_index_type_or(node: &NodeSpec, key: &str, default: DType) -> Result<DType> {
    let d = node.attr_dtype_or(key, default)?;
    if !d.is_integer() {
        return Err(Status::invalid_argument(format!(
            "node '{}' ({}): attr '{key}' must be int32 or int64, got {d}",
            node.name, node.op
        )));
    }
    Ok(d)
}

/// The device's threads lent to one kernel for intra-op parallelism, as
/// TensorFlow's Eigen device lends its pool: run `f(i)` for every
/// `i < chunks` across them, returning once every chunk has run. The
/// executor implements it over the device pool; a kernel must never spawn
/// threads of its own.
pub trait IntraOpPool: Sync {
    /// Threads that may run chunks at once (the caller included).
    fn threads(&self) -> usize;
    /// Runs every chunk, some on the calling thread; a panic in a chunk is
    /// re-raised here once every chunk has finished.
    fn run_chunks(&self, chunks: usize, f: &(dyn Fn(usize) + Sync));
}

/// A kernel's view of one execution: its inputs, its output slots, its
/// device's resources and, when it runs under an executor, its device's
/// threads.
pub struct OpContext<'a> {
    inputs: &'a mut [Option<Value>],
    /// Inputs lent rather than given (constants bound to the graph), by
    /// input index; empty when every input is given.
    lent: &'a [Option<Value>],
    outputs: &'a mut [Option<Value>],
    resources: &'a ResourceMgr,
    intra_op: Option<&'a dyn IntraOpPool>,
}

impl<'a> OpContext<'a> {
    pub fn new(inputs: &'a mut [Option<Value>], outputs: &'a mut [Option<Value>], resources: &'a ResourceMgr) -> Self {
        OpContext { inputs, lent: &[], outputs, resources, intra_op: None }
    }

    /// Lends the device's threads to the kernel.
    #[inline]
    pub fn with_intra_op(mut self, pool: &'a dyn IntraOpPool) -> Self {
        self.intra_op = Some(pool);
        self
    }

    /// The device's threads, when the kernel runs under an executor.
    #[inline]
    pub fn intra_op(&self) -> Option<&'a dyn IntraOpPool> {
        self.intra_op
    }

    /// A context where `lent[i]`, when set, stands for input `i`.
    #[inline]
    pub fn with_lent(
        inputs: &'a mut [Option<Value>],
        lent: &'a [Option<Value>],
        outputs: &'a mut [Option<Value>],
        resources: &'a ResourceMgr,
    ) -> Self {
        OpContext { inputs, lent, outputs, resources, intra_op: None }
    }

    /// Whether input `index` is lent: `take_input` would have to copy its
    /// handle, and its bytes can never be reused in place.
    #[inline(always)]
    pub fn input_is_lent(&self, index: usize) -> bool {
        matches!(self.lent.get(index), Some(Some(_)))
    }

    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    #[inline(always)]
    fn input_value(&self, index: usize) -> Result<&Value> {
        if let Some(Some(v)) = self.lent.get(index) {
            return Ok(v);
        }
        self.inputs.get(index).and_then(|v| v.as_ref()).ok_or_else(|| missing_input(index))
    }

    /// Input `index` as a tensor.
    #[inline(always)]
    pub fn input(&self, index: usize) -> Result<&Tensor> {
        match self.input_value(index)? {
            Value::Tensor(t) => Ok(t),
            other => Err(not_a_tensor(index, other)),
        }
    }

    /// Takes input `index`, so a kernel may reuse its bytes when nobody else
    /// holds them.
    #[inline(always)]
    pub fn take_input(&mut self, index: usize) -> Result<Tensor> {
        if let Some(Some(v)) = self.lent.get(index) {
            return match v {
                Value::Tensor(t) => Ok(t.clone()),
                other => Err(not_a_tensor(index, other)),
            };
        }
        match self.inputs.get_mut(index).and_then(Option::take) {
            Some(Value::Tensor(t)) => Ok(t),
            Some(other) => Err(not_a_tensor(index, &other)),
            None => Err(missing_input(index)),
        }
    }

    /// Takes input `index` whatever it holds (a tensor, a ref, a resource).
    pub fn take_input_value(&mut self, index: usize) -> Result<Value> {
        if let Some(Some(v)) = self.lent.get(index) {
            return Ok(v.clone());
        }
        self.inputs.get_mut(index).and_then(Option::take).ok_or_else(|| missing_input(index))
    }

    /// Input `index` as a ref variable.
    pub fn input_ref(&self, index: usize) -> Result<&Arc<Variable>> {
        match self.input_value(index)? {
            Value::Ref(v) => Ok(v),
            other => Err(Status::internal(format!("input {index} is {other:?}, not a ref"))),
        }
    }

    /// Takes input `index` as a TensorList: the list itself when this
    /// kernel holds the only reference (so it may update it in place), a
    /// shared one otherwise.
    pub fn take_input_list(&mut self, index: usize) -> Result<Arc<TensorList>> {
        match self.take_input_value(index)? {
            Value::List(l) => Ok(l),
            other => Err(Status::invalid_argument(format!("input {index} is {other:?}, not a TensorList"))),
        }
    }

    /// Input `index` as a TensorList.
    pub fn input_list(&self, index: usize) -> Result<&Arc<TensorList>> {
        match self.input_value(index)? {
            Value::List(l) => Ok(l),
            other => Err(Status::invalid_argument(format!("input {index} is {other:?}, not a TensorList"))),
        }
    }

    /// Input `index` as a stack handle (`StackV2`'s output).
    pub fn input_stack(&self, index: usize) -> Result<&Arc<control_flow::stack::Stack>> {
        match self.input_value(index)? {
            Value::Stack(s) => Ok(s),
            other => Err(Status::invalid_argument(format!("input {index} is {other:?}, not a stack handle"))),
        }
    }

    /// Input `index` as a resource handle.
    pub fn input_resource(&self, index: usize) -> Result<&Arc<ResourceHandle>> {
        match self.input_value(index)? {
            Value::Resource(h) => Ok(h),
            other => Err(Status::internal(format!("input {index} is {other:?}, not a resource handle"))),
        }
    }

    #[inline(always)]
    pub fn set_output(&mut self, index: usize, tensor: Tensor) {
        self.set_output_value(index, Value::Tensor(tensor));
    }

    #[inline(always)]
    pub fn set_output_value(&mut self, index: usize, value: Value) {
        assert!(index < self.outputs.len(), "output {index} of {} declared", self.outputs.len());
        self.outputs[index] = Some(value);
    }

    pub fn resources(&self) -> &ResourceMgr {
        self.resources
    }
}

// Out of line: the input accessors sit on every kernel's path and should
// inline to a few loads.
#[cold]
#[inline(never)]
fn missing_input(index: usize) -> Status {
    Status::internal(format!("input {index} is missing"))
}

#[cold]
#[inline(never)]
fn not_a_tensor(index: usize, value: &Value) -> Status {
    Status::internal(format!("input {index} is {value:?}, not a tensor"))
}

/// Runs `kernel` once on `inputs` with a fresh resource container and
/// returns its outputs: the harness kernel tests use.
pub fn run_kernel_once(node: &NodeSpec, inputs: Vec<Value>, resources: &ResourceMgr) -> Result<Vec<Value>> {
    let def = lookup(&node.op).ok_or_else(|| Status::not_found(format!("op '{}' is not registered", node.op)))?;
    let signature = def.resolve(node)?;
    let kernel = def.build_kernel(&KernelInit { node, signature: &signature })?;
    let mut inputs: Vec<Option<Value>> = inputs.into_iter().map(Some).collect();
    let mut outputs: Vec<Option<Value>> = vec![None; signature.outputs.len()];
    kernel.compute(&mut OpContext::new(&mut inputs, &mut outputs, resources))?;
    outputs
        .into_iter()
        .enumerate()
        .map(|(i, v)| v.ok_or_else(|| Status::internal(format!("output {i} was not set"))))
        .collect()
}

#[cfg(test)]
pub(crate) mod testing {
    //! Shorthands for kernel unit tests.
    use super::*;
    use crate::graph::spec::{AttrValue, DataType};

    pub fn ty(d: DType) -> AttrValue {
        AttrValue::Type(DataType::Tensor(d))
    }

    pub fn node(op: &str) -> NodeSpec {
        NodeSpec::new(format!("test_{op}"), op)
    }

    /// Runs a kernel on tensor inputs and returns every output.
    pub fn run_all(node: &NodeSpec, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let resources = ResourceMgr::default();
        let inputs = inputs.iter().cloned().map(Value::Tensor).collect();
        run_kernel_once(node, inputs, &resources)?.into_iter().map(Value::into_tensor).collect()
    }

    /// Builds `node`'s kernel once, for tests whose runs share its state
    /// (a random op's generator).
    pub fn build(node: &NodeSpec) -> Result<Box<dyn OpKernel>> {
        let def = lookup(&node.op).ok_or_else(|| Status::not_found(format!("op '{}' is not registered", node.op)))?;
        let signature = def.resolve(node)?;
        def.build_kernel(&KernelInit { node, signature: &signature })
    }

    /// Runs a built kernel with a single output once on tensor inputs.
    pub fn run_built(kernel: &dyn OpKernel, inputs: &[Tensor]) -> Result<Tensor> {
        let resources = ResourceMgr::default();
        let mut inputs: Vec<Option<Value>> = inputs.iter().cloned().map(|t| Some(Value::Tensor(t))).collect();
        let mut outputs = vec![None];
        kernel.compute(&mut OpContext::new(&mut inputs, &mut outputs, &resources))?;
        outputs.remove(0).ok_or_else(|| Status::internal("output 0 was not set"))?.into_tensor()
    }

    /// Runs a single-output kernel on tensor inputs.
    pub fn run1(node: &NodeSpec, inputs: &[Tensor]) -> Result<Tensor> {
        let resources = ResourceMgr::default();
        let inputs = inputs.iter().cloned().map(Value::Tensor).collect();
        let mut outs = run_kernel_once(node, inputs, &resources)?;
        outs.remove(0).into_tensor()
    }
}
