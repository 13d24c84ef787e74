//! Row updates, the embedding path: an update touches only the rows of a
//! variable that `indices` name.
//! - Sparse optimizers, ref and resource forms: `SparseApplyAdagrad`,
//!   `SparseApplyAdagradV2`, `SparseApplyMomentum`, `SparseApplyRMSProp`,
//!   `SparseApplyCenteredRMSProp`, `SparseApplyAdadelta` and their
//!   `Resource*` twins, plus `ResourceSparseApplyKerasMomentum` (the
//!   regularized ones are `proximal`'s). (TensorFlow has no
//!   sparse gradient-descent or Adam op: tf.compat.v1's SGD scatters
//!   `-lr * grad` with `ResourceScatterAdd`/`ScatterSub`, its Adam
//!   scatters into m and v and updates var densely.)
//! - Scatters, ref (`ScatterAdd`, ...) and resource (`ResourceScatterAdd`,
//!   ...) forms: Add, Sub, Update, Mul, Div, Min, Max.
//!
//! Owns: these kernels, TensorFlow's validation and messages for them, and
//! the row loops. Every index is checked before any row is written, so a
//! bad index leaves the variable as it was (TensorFlow's scatters apply the
//! rows before the bad one). Duplicate indices apply in order, as
//! TensorFlow's CPU kernels do: scatter-adds accumulate, an update keeps the
//! last row. Rows are written in place under the variables' locks (`vars`),
//! so an update costs its rows, not the table.

use super::optimizer::{scalar_input, step_input};
use super::vars::{Form, check_use_locking, collect_array, lock_all, variable_inputs};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::math::{FLOAT, REAL};
use crate::ops::numeric::{Float, Num};
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, Value, ValueType, index_values, unsupported_dtype};
use crate::tensor::{DType, Element, Shape, Tensor};

pub const DEFS: &[OpDef] = &[
    sparse::<SparseAdagrad, 2>("SparseApplyAdagrad"),
    sparse::<SparseAdagrad, 2>("ResourceSparseApplyAdagrad"),
    sparse::<SparseAdagradV2, 2>("SparseApplyAdagradV2"),
    sparse::<SparseAdagradV2, 2>("ResourceSparseApplyAdagradV2"),
    sparse::<SparseMomentum, 2>("SparseApplyMomentum"),
    sparse::<SparseMomentum, 2>("ResourceSparseApplyMomentum"),
    sparse::<SparseKerasMomentum, 2>("ResourceSparseApplyKerasMomentum"),
    sparse::<SparseRmsProp, 3>("SparseApplyRMSProp"),
    sparse::<SparseRmsProp, 3>("ResourceSparseApplyRMSProp"),
    sparse::<SparseCenteredRmsProp, 4>("SparseApplyCenteredRMSProp"),
    sparse::<SparseCenteredRmsProp, 4>("ResourceSparseApplyCenteredRMSProp"),
    sparse::<SparseAdadelta, 3>("SparseApplyAdadelta"),
    sparse::<SparseAdadelta, 3>("ResourceSparseApplyAdadelta"),
    scatter::<Add>("ScatterAdd"),
    scatter::<Add>("ResourceScatterAdd"),
    scatter::<Sub>("ScatterSub"),
    scatter::<Sub>("ResourceScatterSub"),
    scatter::<Update>("ScatterUpdate"),
    scatter::<Update>("ResourceScatterUpdate"),
    scatter::<Mul>("ScatterMul"),
    scatter::<Mul>("ResourceScatterMul"),
    scatter::<Div>("ScatterDiv"),
    scatter::<Div>("ResourceScatterDiv"),
    scatter::<Min>("ScatterMin"),
    scatter::<Min>("ResourceScatterMin"),
    scatter::<Max>("ScatterMax"),
    scatter::<Max>("ResourceScatterMax"),
];

pub(super) const fn sparse<R: SparseRule<V>, const V: usize>(name: &'static str) -> OpDef {
    OpDef::kernel(name, sparse_signature::<R, V>, build_sparse::<R, V>).stateful()
}

const fn scatter<S: ScatterOp>(name: &'static str) -> OpDef {
    OpDef::kernel(name, scatter_signature, build_scatter::<S>).stateful()
}

/// The `Tindices` attribute: int32 or int64.
fn indices_type(node: &NodeSpec) -> Result<DType> {
    let d = node.attr_dtype("Tindices")?;
    if !d.is_integer() {
        bail!(invalid_argument, "node '{}' ({}): attr 'Tindices' must be int32 or int64, got {d}", node.name, node.op);
    }
    Ok(d)
}

// ---------------------------------------------------------------------------
// Sparse optimizers

/// An input after the variables.
#[derive(Debug, Clone, Copy)]
pub enum SparseArg {
    /// A scalar, with TensorFlow's message when it is not one.
    Scalar(&'static str),
    /// An int64 scalar step count, as [`Arg::Step`](super::optimizer::Arg::Step).
    Step(&'static str),
    Grad,
    Indices,
}

/// One of TensorFlow's sparse update rules: the dense rule applied to
/// `var[indices[i]]` and its slots with `grad[i]`.
pub trait SparseRule<const V: usize>: Sized + Send + Sync + 'static {
    /// The slots' input names after var.
    const VARS: [&'static str; V];
    const ARGS: &'static [SparseArg];
    /// Whether TensorFlow refuses rows of zero elements (its Adagrad kernels
    /// do, its Momentum kernels do not).
    const NEEDS_INNER: bool;

    fn new(node: &NodeSpec) -> Result<Self>;

    /// Checks the scalar inputs' values before any row is written.
    fn check<T: Float>(&self, _s: &[T]) -> Result<()> {
        Ok(())
    }

    /// Updates one row of var and its slots with one row of the gradient;
    /// `s` holds the scalar inputs in `ARGS` order.
    fn update_row<T: Float>(&self, s: &[T], rows: [&mut [T]; V], grad: &[T]);
}

const MAX_SPARSE_SCALARS: usize = 6;

fn sparse_signature<R: SparseRule<V>, const V: usize>(node: &NodeSpec) -> Result<OpSignature> {
    let t = node.attr_dtype("T")?;
    let index = indices_type(node)?;
    let form = Form::of(&node.op);
    let mut inputs = vec![form.var_type(t); V];
    inputs.extend(R::ARGS.iter().map(|a| match a {
        SparseArg::Indices => ValueType::Tensor(index),
        SparseArg::Step(_) => ValueType::Tensor(DType::I64),
        SparseArg::Scalar(_) | SparseArg::Grad => ValueType::Tensor(t),
    }));
    Ok(OpSignature::new(inputs, form.outputs(t)))
}

type SparseFn<R> = fn(&R, Form, &mut OpContext<'_>) -> Result<()>;

struct SparseKernel<R> {
    rule: R,
    form: Form,
    compute: SparseFn<R>,
}

impl<R: Send + Sync + 'static> OpKernel for SparseKernel<R> {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        (self.compute)(&self.rule, self.form, ctx)
    }
}

fn build_sparse<R: SparseRule<V>, const V: usize>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    check_use_locking(init.node, false)?;
    indices_type(init.node)?;
    let dtype = init.node.attr_dtype("T")?;
    let compute: SparseFn<R> = match dtype {
        DType::F32 => run_sparse::<R, V, f32>,
        DType::F64 => run_sparse::<R, V, f64>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, FLOAT)),
    };
    Ok(Box::new(SparseKernel { rule: R::new(init.node)?, form: Form::of(&init.node.op), compute }))
}

fn run_sparse<R: SparseRule<V>, const V: usize, T: Float>(rule: &R, form: Form, ctx: &mut OpContext<'_>) -> Result<()> {
    let vars = variable_inputs::<V>(ctx, form, T::DTYPE)?;
    {
        let mut guards = lock_all(&vars)?;
        let shapes = collect_array(guards.each_ref().map(|g| g.value().map(|v| v.shape().clone())))?;
        for (name, shape) in R::VARS.iter().zip(&shapes).skip(1) {
            if *shape != shapes[0] {
                bail!(invalid_argument, "var and {name} do not have the same shape{} {shape}", shapes[0]);
            }
        }
        let var_shape = &shapes[0];
        if var_shape.rank() < 1 {
            bail!(invalid_argument, "var must be at least 1 dimensional");
        }
        let mut scalars = [T::ZERO; MAX_SPARSE_SCALARS];
        let mut count = 0;
        let (mut grad, mut indices) = (None, None);
        for (k, arg) in R::ARGS.iter().enumerate() {
            let input = ctx.input(V + k)?;
            match *arg {
                SparseArg::Scalar(what) => {
                    scalars[count] = scalar_input::<T>(input, what)?;
                    count += 1;
                }
                SparseArg::Step(what) => {
                    scalars[count] = step_input::<T>(input, what, false)?;
                    count += 1;
                }
                SparseArg::Grad => grad = Some(input),
                SparseArg::Indices => indices = Some(input),
            }
        }
        let (Some(grad), Some(indices)) = (grad, indices) else {
            bail!(internal, "a sparse rule without a gradient or indices");
        };
        if indices.rank() != 1 {
            bail!(invalid_argument, "indices must be one-dimensional");
        }
        if grad.rank() != var_shape.rank() {
            bail!(invalid_argument, "grad must have the same number of dimensions as var");
        }
        for d in 1..var_shape.rank() {
            if var_shape.dim(d) != grad.dims()[d] {
                bail!(invalid_argument, "var and grad must match in dimension {d}");
            }
        }
        let n = indices.dims()[0];
        if grad.dims()[0] != n {
            bail!(invalid_argument, "grad must be the same size as indices in the first dimension.");
        }
        let inner: usize = var_shape.dims()[1..].iter().product();
        if R::NEEDS_INNER && inner == 0 {
            bail!(invalid_argument, "Inner dimension should be greater than zero.");
        }
        let rows = checked_rows(indices, var_shape.dim(0), |index, offset| {
            format!("Index {index} at offset {offset} in indices is out of range")
        })?;
        rule.check(&scalars[..count])?;
        if n > 0 && inner > 0 {
            let grad = grad.as_slice::<T>()?;
            let mut slices = collect_array(guards.each_mut().map(|g| g.elements_mut::<T>()))?;
            for (i, &row) in rows.iter().enumerate() {
                let span = row * inner..(row + 1) * inner;
                let vs = slices.each_mut().map(|s| &mut s[span.clone()]);
                rule.update_row(&scalars[..count], vs, &grad[i * inner..(i + 1) * inner]);
            }
        }
    }
    if form == Form::Ref {
        let var = vars[0].clone();
        ctx.set_output_value(0, Value::Ref(var));
    }
    Ok(())
}

/// The indices as rows of a first dimension of `limit`, or the message
/// `bad(index, offset)` for the first one outside `[0, limit)`.
fn checked_rows(indices: &Tensor, limit: usize, bad: impl Fn(i64, usize) -> String) -> Result<Vec<usize>> {
    let values = index_values(indices, "indices")?;
    values
        .iter()
        .enumerate()
        .map(|(offset, &index)| match usize::try_from(index) {
            Ok(row) if row < limit => Ok(row),
            _ => Err(Status::invalid_argument(bad(index, offset))),
        })
        .collect()
}

/// `accum += grad^2` (unless `update_slots` is false), then
/// `var -= lr * grad * rsqrt(accum)`; on rows of one element TensorFlow
/// computes `lr * grad / sqrt(accum)` instead, and so does this.
pub struct SparseAdagrad {
    update_slots: bool,
}
impl SparseRule<2> for SparseAdagrad {
    const VARS: [&'static str; 2] = ["var", "accum"];
    const ARGS: &'static [SparseArg] =
        &[SparseArg::Scalar("lr is not a scalar: "), SparseArg::Grad, SparseArg::Indices];
    const NEEDS_INNER: bool = true;

    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(SparseAdagrad { update_slots: node.attr_bool_or("update_slots", true)? })
    }

    fn update_row<T: Float>(&self, s: &[T], [var, accum]: [&mut [T]; 2], grad: &[T]) {
        let lr = s[0];
        let scalar_row = grad.len() == 1;
        for ((v, a), &g) in var.iter_mut().zip(accum.iter_mut()).zip(grad) {
            if self.update_slots {
                *a = a.add(g.mul(g));
            }
            let step = if scalar_row { lr.mul(g).div(a.sqrt()) } else { lr.mul(g).mul(T::ONE.div(a.sqrt())) };
            *v = v.sub(step);
        }
    }
}

/// `accum += grad^2` (unless `update_slots` is false), then
/// `var -= lr * grad / (sqrt(accum) + epsilon)`.
pub struct SparseAdagradV2 {
    update_slots: bool,
}
impl SparseRule<2> for SparseAdagradV2 {
    const VARS: [&'static str; 2] = ["var", "accum"];
    const ARGS: &'static [SparseArg] = &[
        SparseArg::Scalar("lr is not a scalar: "),
        SparseArg::Scalar("epsilon is not a scalar: "),
        SparseArg::Grad,
        SparseArg::Indices,
    ];
    const NEEDS_INNER: bool = true;

    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(SparseAdagradV2 { update_slots: node.attr_bool_or("update_slots", true)? })
    }

    fn update_row<T: Float>(&self, s: &[T], [var, accum]: [&mut [T]; 2], grad: &[T]) {
        let (lr, epsilon) = (s[0], s[1]);
        for ((v, a), &g) in var.iter_mut().zip(accum.iter_mut()).zip(grad) {
            if self.update_slots {
                *a = a.add(g.mul(g));
            }
            *v = v.sub(lr.mul(g).div(a.sqrt().add(epsilon)));
        }
    }
}

const MOMENTUM_ARGS: &[SparseArg] = &[
    SparseArg::Scalar("lr is not a scalar : "),
    SparseArg::Grad,
    SparseArg::Indices,
    SparseArg::Scalar("momentum is not a scalar: "),
];

/// `accum = accum * momentum + grad`, then `var -= lr * accum`, or with
/// Nesterov `var -= lr * grad + lr * momentum * accum`.
pub struct SparseMomentum {
    nesterov: bool,
}
impl SparseRule<2> for SparseMomentum {
    const VARS: [&'static str; 2] = ["var", "accum"];
    const ARGS: &'static [SparseArg] = MOMENTUM_ARGS;
    const NEEDS_INNER: bool = false;

    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(SparseMomentum { nesterov: node.attr_bool_or("use_nesterov", false)? })
    }

    fn update_row<T: Float>(&self, s: &[T], [var, accum]: [&mut [T]; 2], grad: &[T]) {
        let (lr, momentum) = (s[0], s[1]);
        for ((v, a), &g) in var.iter_mut().zip(accum.iter_mut()).zip(grad) {
            *a = a.mul(momentum).add(g);
            let step = if self.nesterov { lr.mul(g).add(lr.mul(momentum).mul(*a)) } else { lr.mul(*a) };
            *v = v.sub(step);
        }
    }
}

/// `accum = accum * momentum - grad * lr`, then `var += accum`, or with
/// Nesterov `var += accum * momentum - grad * lr`.
pub struct SparseKerasMomentum {
    nesterov: bool,
}
impl SparseRule<2> for SparseKerasMomentum {
    const VARS: [&'static str; 2] = ["var", "accum"];
    const ARGS: &'static [SparseArg] = MOMENTUM_ARGS;
    const NEEDS_INNER: bool = false;

    fn new(node: &NodeSpec) -> Result<Self> {
        Ok(SparseKerasMomentum { nesterov: node.attr_bool_or("use_nesterov", false)? })
    }

    fn update_row<T: Float>(&self, s: &[T], [var, accum]: [&mut [T]; 2], grad: &[T]) {
        let (lr, momentum) = (s[0], s[1]);
        for ((v, a), &g) in var.iter_mut().zip(accum.iter_mut()).zip(grad) {
            *a = a.mul(momentum).sub(g.mul(lr));
            let step = if self.nesterov { a.mul(momentum).sub(g.mul(lr)) } else { *a };
            *v = v.add(step);
        }
    }
}

/// The RMSProp row rules' scalars.
const RMSPROP_ARGS: &[SparseArg] = &[
    SparseArg::Scalar("lr is not a scalar: "),
    SparseArg::Scalar("rho is not a scalar: "),
    SparseArg::Scalar("momentum is not a scalar: "),
    SparseArg::Scalar("epsilon is not a scalar: "),
    SparseArg::Grad,
    SparseArg::Indices,
];

/// The row form differs from the dense one:
/// `ms = ms * rho + grad^2 * (1 - rho)`,
/// `mom = mom * momentum + (rsqrt(ms + epsilon) * lr) * grad`, `var -= mom`.
pub struct SparseRmsProp;
impl SparseRule<3> for SparseRmsProp {
    const VARS: [&'static str; 3] = ["var", "ms", "mom"];
    const ARGS: &'static [SparseArg] = RMSPROP_ARGS;
    const NEEDS_INNER: bool = false;

    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(SparseRmsProp)
    }

    fn update_row<T: Float>(&self, s: &[T], [var, ms, mom]: [&mut [T]; 3], grad: &[T]) {
        let (lr, rho, momentum, epsilon) = (s[0], s[1], s[2], s[3]);
        let one_minus_rho = T::ONE.sub(rho);
        for (((v, ms), mom), &g) in var.iter_mut().zip(ms.iter_mut()).zip(mom.iter_mut()).zip(grad) {
            *ms = ms.mul(rho).add(g.mul(g).mul(one_minus_rho));
            *mom = mom.mul(momentum).add(T::ONE.div(ms.add(epsilon).sqrt()).mul(lr).mul(g));
            *v = v.sub(*mom);
        }
    }
}

/// The row form differs from the dense one:
/// `ms = ms * rho + grad^2 * (1 - rho)`, `mg = mg * rho + grad * (1 - rho)`,
/// `mom = mom * momentum + (rsqrt(ms + epsilon - mg^2) * lr) * grad`,
/// `var -= mom`.
pub struct SparseCenteredRmsProp;
impl SparseRule<4> for SparseCenteredRmsProp {
    const VARS: [&'static str; 4] = ["var", "mg", "ms", "mom"];
    const ARGS: &'static [SparseArg] = RMSPROP_ARGS;
    const NEEDS_INNER: bool = false;

    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(SparseCenteredRmsProp)
    }

    fn update_row<T: Float>(&self, s: &[T], [var, mg, ms, mom]: [&mut [T]; 4], grad: &[T]) {
        let (lr, rho, momentum, epsilon) = (s[0], s[1], s[2], s[3]);
        let one_minus_rho = T::ONE.sub(rho);
        let rows = var.iter_mut().zip(mg.iter_mut()).zip(ms.iter_mut()).zip(mom.iter_mut()).zip(grad);
        for ((((v, mg), ms), mom), &g) in rows {
            *ms = ms.mul(rho).add(g.mul(g).mul(one_minus_rho));
            *mg = mg.mul(rho).add(g.mul(one_minus_rho));
            let denom = ms.add(epsilon).sub(mg.mul(*mg));
            *mom = mom.mul(momentum).add(T::ONE.div(denom.sqrt()).mul(lr).mul(g));
            *v = v.sub(*mom);
        }
    }
}

/// As the dense rule, row by row.
pub struct SparseAdadelta;
impl SparseRule<3> for SparseAdadelta {
    const VARS: [&'static str; 3] = ["var", "accum_grad", "accum_update"];
    const ARGS: &'static [SparseArg] = &[
        SparseArg::Scalar("lr is not a scalar: "),
        SparseArg::Scalar("rho is not a scalar: "),
        SparseArg::Scalar("epsilon is not a scalar: "),
        SparseArg::Grad,
        SparseArg::Indices,
    ];
    const NEEDS_INNER: bool = false;

    fn new(_node: &NodeSpec) -> Result<Self> {
        Ok(SparseAdadelta)
    }

    fn update_row<T: Float>(&self, s: &[T], vars: [&mut [T]; 3], grad: &[T]) {
        use super::optimizer::DenseRule;
        super::optimizer::Adadelta.update(s, vars, grad);
    }
}

// ---------------------------------------------------------------------------
// Scatters

/// How a scatter combines a variable's element with an update's.
pub trait ScatterOp: 'static {
    /// The dtypes TensorFlow registers the op for (of those this runtime has).
    const DTYPES: &'static [DType];
    /// Whether updates are divisors, to be checked for zeros first.
    const DIVIDES: bool = false;
    fn apply<T: Num>(current: T, update: T) -> T;
}

pub struct Add;
impl ScatterOp for Add {
    const DTYPES: &'static [DType] = REAL;
    fn apply<T: Num>(current: T, update: T) -> T {
        current.add(update)
    }
}

pub struct Sub;
impl ScatterOp for Sub {
    const DTYPES: &'static [DType] = REAL;
    fn apply<T: Num>(current: T, update: T) -> T {
        current.sub(update)
    }
}

/// Replaces; also defined on bool (see `scatter_update_bool`).
pub struct Update;
impl ScatterOp for Update {
    const DTYPES: &'static [DType] = &[DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool];
    fn apply<T: Num>(_current: T, update: T) -> T {
        update
    }
}

pub struct Mul;
impl ScatterOp for Mul {
    const DTYPES: &'static [DType] = REAL;
    fn apply<T: Num>(current: T, update: T) -> T {
        current.mul(update)
    }
}

/// Zero divisors are refused before anything is written where TensorFlow
/// refuses them (see `run_scatter`).
pub struct Div;
impl ScatterOp for Div {
    const DTYPES: &'static [DType] = REAL;
    const DIVIDES: bool = true;
    fn apply<T: Num>(current: T, update: T) -> T {
        current.div(update)
    }
}

/// `std::min(current, update)`, as TensorFlow's CPU scatter computes it:
/// the current value unless the update is smaller, so a NaN update is
/// ignored and a NaN already there stays.
pub struct Min;
impl ScatterOp for Min {
    const DTYPES: &'static [DType] = REAL;
    fn apply<T: Num>(current: T, update: T) -> T {
        if update < current { update } else { current }
    }
}

/// `std::max(current, update)`, as [`Min`].
pub struct Max;
impl ScatterOp for Max {
    const DTYPES: &'static [DType] = REAL;
    fn apply<T: Num>(current: T, update: T) -> T {
        if current < update { update } else { current }
    }
}

/// Ref: `[T_ref, Tindices, T] -> [T_ref]`; resource:
/// `[resource, Tindices, dtype] -> []`.
fn scatter_signature(node: &NodeSpec) -> Result<OpSignature> {
    let form = Form::of(&node.op);
    let t = node.attr_dtype(if form == Form::Ref { "T" } else { "dtype" })?;
    let index = indices_type(node)?;
    let inputs = vec![form.var_type(t), ValueType::Tensor(index), ValueType::Tensor(t)];
    Ok(OpSignature::new(inputs, form.outputs(t)))
}

type ScatterFn = fn(Form, &mut OpContext<'_>) -> Result<()>;

struct ScatterKernel {
    form: Form,
    compute: ScatterFn,
}

impl OpKernel for ScatterKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        (self.compute)(self.form, ctx)
    }
}

fn build_scatter<S: ScatterOp>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let form = Form::of(&init.node.op);
    let dtype = init.node.attr_dtype(if form == Form::Ref { "T" } else { "dtype" })?;
    if form == Form::Ref {
        // ScatterUpdate alone locks by default.
        check_use_locking(init.node, init.node.op == "ScatterUpdate")?;
    }
    indices_type(init.node)?;
    if !S::DTYPES.contains(&dtype) {
        return Err(unsupported_dtype(&init.node.op, dtype, S::DTYPES));
    }
    let compute: ScatterFn = match dtype {
        DType::F32 => run_scatter::<S, f32>,
        DType::F64 => run_scatter::<S, f64>,
        DType::I32 => run_scatter::<S, i32>,
        DType::I64 => run_scatter::<S, i64>,
        DType::Bool => scatter_update_bool,
        _ => {
            return Err(unsupported_dtype(&init.node.op, dtype, S::DTYPES));
        }
    };
    Ok(Box::new(ScatterKernel { form, compute }))
}

/// Checks a scatter's operands against the variable's shape and returns
/// the elements per row.
fn check_scatter_shapes(form: Form, params: &Shape, indices: &Tensor, updates: &Tensor) -> Result<usize> {
    let mismatch = || {
        Status::invalid_argument(format!(
            "Must have updates.shape = indices.shape + params.shape[1:] or updates.shape = [], got updates.shape {}, indices.shape {}, params.shape {params}",
            updates.shape(),
            indices.shape(),
        ))
    };
    let scalar_update = updates.rank() == 0;
    if form == Form::Resource && !scalar_update && updates.rank() + 1 != indices.rank() + params.rank() {
        return Err(mismatch());
    }
    if params.rank() < 1 {
        bail!(invalid_argument, "params must be at least 1-D, got shape {params}");
    }
    if !scalar_update {
        if form == Form::Resource && !updates.dims().starts_with(indices.dims()) {
            bail!(
                invalid_argument,
                "The shape of indices ({}) must be a prefix of the shape of updates ({})",
                indices.shape(),
                updates.shape()
            );
        }
        let want = indices.dims().iter().chain(&params.dims()[1..]);
        if updates.rank() != indices.rank() + params.rank() - 1 || !updates.dims().iter().eq(want) {
            return Err(mismatch());
        }
    }
    Ok(params.dims()[1..].iter().product())
}

/// The rows a scatter writes, in order, or TensorFlow's message for the
/// first index outside the variable.
fn scatter_rows_of(params: &Shape, indices: &Tensor) -> Result<Vec<usize>> {
    checked_rows(indices, params.dim(0), |index, offset| {
        format!("indices{} = {index} is not in [0, {})", super::flat_position(indices.shape(), offset), params.dim(0))
    })
}

fn run_scatter<S: ScatterOp, T: Num>(form: Form, ctx: &mut OpContext<'_>) -> Result<()> {
    let [var] = variable_inputs::<1>(ctx, form, T::DTYPE)?;
    {
        let mut guard = var.lock();
        let params = guard.value()?.shape().clone();
        let (indices, updates) = (ctx.input(1)?, ctx.input(2)?);
        let inner = check_scatter_shapes(form, &params, indices, updates)?;
        let updates = updates.as_slice::<T>()?;
        // TensorFlow's resource form refuses zero divisors of any type; its
        // ref form divides floats by zero, and crashes on integers.
        let refuse_zero = S::DIVIDES && (form == Form::Resource || !T::IS_FLOAT);
        if refuse_zero && indices.num_elements() > 0 && updates.contains(&T::ZERO) {
            bail!(invalid_argument, "updates must not contain 0");
        }
        let rows = scatter_rows_of(&params, indices)?;
        if !rows.is_empty() && inner > 0 {
            let values = guard.elements_mut::<T>()?;
            scatter_rows(values, &rows, inner, updates, S::apply);
        }
    }
    if form == Form::Ref {
        ctx.set_output_value(0, Value::Ref(var));
    }
    Ok(())
}

/// `values[row] = f(values[row], update)` for each row in order; `updates`
/// holds a row per index, or one element for all.
fn scatter_rows<T: Element>(values: &mut [T], rows: &[usize], inner: usize, updates: &[T], f: impl Fn(T, T) -> T) {
    if let [u] = *updates {
        for &row in rows {
            values[row * inner..(row + 1) * inner].iter_mut().for_each(|x| *x = f(*x, u));
        }
        return;
    }
    for (&row, update) in rows.iter().zip(updates.chunks_exact(inner)) {
        for (x, &u) in values[row * inner..(row + 1) * inner].iter_mut().zip(update) {
            *x = f(*x, u);
        }
    }
}

/// `ScatterUpdate`/`ResourceScatterUpdate` on bool variables.
fn scatter_update_bool(form: Form, ctx: &mut OpContext<'_>) -> Result<()> {
    let [var] = variable_inputs::<1>(ctx, form, DType::Bool)?;
    {
        let mut guard = var.lock();
        let params = guard.value()?.shape().clone();
        let (indices, updates) = (ctx.input(1)?, ctx.input(2)?);
        let inner = check_scatter_shapes(form, &params, indices, updates)?;
        let rows = scatter_rows_of(&params, indices)?;
        if !rows.is_empty() && inner > 0 {
            let values = guard.elements_mut::<bool>()?;
            scatter_rows(values, &rows, inner, updates.as_slice::<bool>()?, |_, u| u);
        }
    }
    if form == Form::Ref {
        ctx.set_output_value(0, Value::Ref(var));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;
    use crate::graph::spec::AttrValue;
    use crate::ops::ResourceMgr;
    use crate::ops::testing::ty;
    use crate::ops::training::optimizer::tests::{close, f32s, step, values, variable};

    #[rustfmt::skip]
    const TABLE: [f32; 12] = [0.5, -1.25, 2.0, 3.0, -0.75, 1.5, 0.25, 0.125, -4.0, 1.0, 2.0, 3.0];
    const ROWS: [f32; 9] = [0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 1.5, 0.25, -2.0];

    fn op(name: &str, indices: DType) -> NodeSpec {
        NodeSpec::new(name.to_lowercase(), name).attr("T", ty(DType::F32)).attr("Tindices", ty(indices))
    }

    fn table(slot: Option<f32>) -> ResourceMgr {
        let mgr = ResourceMgr::default();
        variable(&mgr, "var", f32s(&[4, 3], &TABLE));
        if let Some(init) = slot {
            variable(&mgr, "accum", f32s(&[4, 3], &[init; 12]));
        }
        mgr
    }

    fn idx(v: &[i32]) -> Tensor {
        Tensor::from_slice::<i32>([v.len()], v).unwrap()
    }

    fn grads() -> Tensor {
        f32s(&[3, 3], &ROWS)
    }

    // Expected values below: TensorFlow 2.21's ResourceSparseApply* and
    // ResourceScatter* kernels on CPU, var = TABLE, indices [2, 0, 2].

    #[test]
    fn sparse_adagrad_matches_tf() {
        #[rustfmt::skip]
        let var = [
            [0.5784464478492737, -1.3345154523849487, 2.0884652137756348, 3.0, -0.75, 1.5, 0.12220717966556549, 0.1228966936469078, -3.971118450164795, 1.0, 2.0, 3.0],
            [0.640167772769928, -1.3990651369094849, 2.15472412109375, 3.0, -0.75, 1.5, 0.045925162732601166, 0.11824266612529755, -3.9161148071289062, 1.0, 2.0, 3.0],
        ];
        #[rustfmt::skip]
        let accum = [
            [0.2600000202655792, 0.3499999940395355, 0.46000000834465027, 0.1, 0.1, 0.1, 2.359999895095825, 0.20250000059604645, 4.190000057220459, 0.1, 0.1, 0.1],
            [0.42000001668930054, 0.6000000238418579, 0.8200000524520874, 0.1, 0.1, 0.1, 4.619999885559082, 0.3050000071525574, 8.280000686645508, 0.1, 0.1, 0.1],
        ];
        for name in ["SparseApplyAdagrad", "ResourceSparseApplyAdagrad"] {
            let mgr = table(Some(0.1));
            for k in 0..2 {
                let out = step(
                    &mgr,
                    &op(name, DType::I32),
                    &["var", "accum"],
                    &[Tensor::scalar(0.1f32), grads(), idx(&[2, 0, 2])],
                )
                .unwrap();
                assert_eq!(out.len(), usize::from(name == "SparseApplyAdagrad"), "ref forms pass the ref on");
                close(&values(&mgr, "var"), &var[k], 0.0);
                close(&values(&mgr, "accum"), &accum[k], 1e-7);
            }
        }
        // Rows of one element take TF's scalar path, lr * g / sqrt(a).
        let mgr = ResourceMgr::default();
        variable(&mgr, "var", f32s(&[5], &[0.5, -1.25, 2.0, 3.0, -0.75]));
        variable(&mgr, "accum", f32s(&[5], &[0.1; 5]));
        let indices = Tensor::from_slice::<i64>([3], &[4, 1, 4]).unwrap();
        let args = [Tensor::scalar(0.1f32), f32s(&[3], &[0.3, -0.7, 1.1]), indices];
        step(&mgr, &op("ResourceSparseApplyAdagrad", DType::I64), &["var", "accum"], &args).unwrap();
        close(&values(&mgr, "var"), &[0.5, -1.1588677167892456, 2.0, 3.0, -0.9117916822433472], 0.0);
        close(&values(&mgr, "accum"), &[0.1, 0.5899999737739563, 0.1, 0.1, 1.4000000953674316], 1e-7);
        // V2.
        let mgr = table(Some(0.1));
        let args = [Tensor::scalar(0.1f32), Tensor::scalar(1e-7f32), grads(), idx(&[2, 0, 2])];
        step(&mgr, &op("ResourceSparseApplyAdagradV2", DType::I32), &["var", "accum"], &args).unwrap();
        #[rustfmt::skip]
        let want = [0.5784464478492737, -1.3345154523849487, 2.0884652137756348, 3.0, -0.75, 1.5, 0.12220718711614609, 0.12289668619632721, -3.971118450164795, 1.0, 2.0, 3.0];
        close(&values(&mgr, "var"), &want, 0.0);
    }

    #[test]
    fn sparse_momentum_matches_tf() {
        #[rustfmt::skip]
        let plain = [0.5400000214576721, -1.2999999523162842, 2.059999942779541, 3.0, -0.75, 1.5, 0.08099998533725739, 0.1379999965429306, -3.8570001125335693, 1.0, 2.0, 3.0];
        #[rustfmt::skip]
        let nesterov = [0.5759999752044678, -1.3450000286102295, 2.114000082015991, 3.0, -0.75, 1.5, -0.062099993228912354, 0.13170000910758972, -3.7013001441955566, 1.0, 2.0, 3.0];
        #[rustfmt::skip]
        let accum = [-0.4000000059604645, 0.5, -0.6000000238418579, 0.0, 0.0, 0.0, 1.590000033378601, 0.07000000774860382, -1.7300000190734863, 0.0, 0.0, 0.0];
        #[rustfmt::skip]
        let keras_accum = [0.04000000283122063, -0.05000000074505806, 0.06000000238418579, 0.0, 0.0, 0.0, -0.15900000929832458, -0.006999999284744263, 0.1730000078678131, 0.0, 0.0, 0.0];
        let cases = [
            ("SparseApplyMomentum", false, plain, accum),
            ("ResourceSparseApplyMomentum", true, nesterov, accum),
            ("ResourceSparseApplyKerasMomentum", false, plain, keras_accum),
            ("ResourceSparseApplyKerasMomentum", true, nesterov, keras_accum),
        ];
        for (name, nest, var, accum) in cases {
            let mgr = table(Some(0.0));
            let node = op(name, DType::I32).attr("use_nesterov", AttrValue::Bool(nest));
            let args = [Tensor::scalar(0.1f32), grads(), idx(&[2, 0, 2]), Tensor::scalar(0.9f32)];
            step(&mgr, &node, &["var", "accum"], &args).unwrap();
            close(&values(&mgr, "var"), &var, 0.0);
            close(&values(&mgr, "accum"), &accum, 0.0);
        }
    }

    #[test]
    fn sparse_validation_matches_tf_messages() {
        let mgr = table(Some(0.1));
        let adagrad = |lr: Tensor, grad: Tensor, indices: Tensor| {
            step(&mgr, &op("SparseApplyAdagrad", DType::I32), &["var", "accum"], &[lr, grad, indices])
                .unwrap_err()
                .message
                .clone()
        };
        let lr = || Tensor::scalar(0.1f32);
        assert_eq!(adagrad(f32s(&[1], &[0.1]), grads(), idx(&[2, 0, 2])), "lr is not a scalar: [1]");
        assert_eq!(adagrad(lr(), grads(), idx(&[1, 5, 0])), "Index 5 at offset 1 in indices is out of range");
        assert_eq!(adagrad(lr(), grads(), idx(&[1, -1, 0])), "Index -1 at offset 1 in indices is out of range");
        let two_d = Tensor::from_slice::<i32>([1, 3], &[1, 0, 2]).unwrap();
        assert_eq!(adagrad(lr(), grads(), two_d), "indices must be one-dimensional");
        assert_eq!(
            adagrad(lr(), f32s(&[9], &ROWS), idx(&[1, 0, 2])),
            "grad must have the same number of dimensions as var"
        );
        assert_eq!(adagrad(lr(), f32s(&[3, 2], &[0.0; 6]), idx(&[1, 0, 2])), "var and grad must match in dimension 1");
        assert_eq!(
            adagrad(lr(), grads(), idx(&[1, 0])),
            "grad must be the same size as indices in the first dimension."
        );
        // Nothing was written by the failed updates.
        close(&values(&mgr, "var"), &TABLE.map(f64::from), 0.0);
        // No rows at all is a no-op.
        step(&mgr, &op("SparseApplyAdagrad", DType::I32), &["var", "accum"], &[lr(), f32s(&[0, 3], &[]), idx(&[])])
            .unwrap();
        close(&values(&mgr, "var"), &TABLE.map(f64::from), 0.0);
        let momentum = |lr: Tensor, m: Tensor| {
            let node = op("ResourceSparseApplyMomentum", DType::I32);
            step(&mgr, &node, &["var", "accum"], &[lr, grads(), idx(&[2, 0, 2]), m]).unwrap_err().message.clone()
        };
        assert_eq!(momentum(f32s(&[1], &[0.1]), Tensor::scalar(0.9f32)), "lr is not a scalar : [1]");
        assert_eq!(momentum(lr(), f32s(&[1], &[0.9])), "momentum is not a scalar: [1]");
        variable(&mgr, "narrow", f32s(&[3, 4], &[0.0; 12]));
        let err =
            step(&mgr, &op("SparseApplyAdagrad", DType::I32), &["var", "narrow"], &[lr(), grads(), idx(&[2, 0, 2])]);
        assert_eq!(err.unwrap_err().message, "var and accum do not have the same shape[4,3] [3,4]");
        // Shapes of the variable itself.
        variable(&mgr, "scalar", Tensor::scalar(1.0f32));
        variable(&mgr, "scalar_accum", Tensor::scalar(1.0f32));
        let err = step(
            &mgr,
            &op("SparseApplyAdagrad", DType::I32),
            &["scalar", "scalar_accum"],
            &[lr(), f32s(&[1], &[1.0]), idx(&[0])],
        );
        assert_eq!(err.unwrap_err().message, "var must be at least 1 dimensional");
        variable(&mgr, "hollow", Tensor::zeros(DType::F32, [2, 0]).unwrap());
        variable(&mgr, "hollow_accum", Tensor::zeros(DType::F32, [2, 0]).unwrap());
        let hollow_args = [lr(), Tensor::zeros(DType::F32, [1, 0]).unwrap(), idx(&[0])];
        let err = step(&mgr, &op("SparseApplyAdagrad", DType::I32), &["hollow", "hollow_accum"], &hollow_args);
        assert_eq!(err.unwrap_err().message, "Inner dimension should be greater than zero.");
        // TF's momentum kernels accept empty rows.
        let node = op("SparseApplyMomentum", DType::I32);
        let args = [lr(), Tensor::zeros(DType::F32, [1, 0]).unwrap(), idx(&[0]), Tensor::scalar(0.9f32)];
        step(&mgr, &node, &["hollow", "hollow_accum"], &args).unwrap();
    }

    #[test]
    fn row_updates_write_in_place() {
        let mgr = table(None);
        let before = mgr.lookup("", "var").unwrap().read().unwrap();
        let node =
            NodeSpec::new("s", "ResourceScatterAdd").attr("dtype", ty(DType::F32)).attr("Tindices", ty(DType::I32));
        // A reader holds the table: the update goes to a copy.
        step(&mgr, &node, &["var"], &[idx(&[1]), f32s(&[1, 3], &[1.0; 3])]).unwrap();
        close(&before.to_f64_vec(), &TABLE.map(f64::from), 0.0);
        drop(before);
        // Nobody holds it: the rows are written where they are.
        let ptr = mgr.lookup("", "var").unwrap().read().unwrap().data_ptr();
        step(&mgr, &node, &["var"], &[idx(&[1]), f32s(&[1, 3], &[1.0; 3])]).unwrap();
        let after = mgr.lookup("", "var").unwrap().read().unwrap();
        assert_eq!(after.data_ptr(), ptr);
        assert_eq!(&after.as_slice::<f32>().unwrap()[3..6], &[5.0, 1.25, 3.5]);
    }

    fn scatter(kind: &str, form: Form, t: DType) -> NodeSpec {
        match form {
            Form::Ref => NodeSpec::new("s", format!("Scatter{kind}")).attr("T", ty(t)),
            Form::Resource => NodeSpec::new("s", format!("ResourceScatter{kind}")).attr("dtype", ty(t)),
        }
        .attr("Tindices", ty(DType::I64))
    }

    #[test]
    fn scatters_match_tf() {
        let indices = Tensor::from_slice::<i64>([2, 2], &[2, 0, 2, 3]).unwrap();
        let updates = Tensor::from_map([2, 2, 3], &(0..12).collect::<Vec<_>>(), |i| i as f32 - 5.0).unwrap();
        #[rustfmt::skip]
        let cases: [(&str, [f64; 12]); 6] = [
            ("Add", [-1.5, -2.25, 2.0, 3.0, -0.75, 1.5, -3.75, -1.875, -4.0, 5.0, 7.0, 9.0]),
            ("Sub", [2.5, -0.25, 2.0, 3.0, -0.75, 1.5, 4.25, 2.125, -4.0, -3.0, -3.0, -3.0]),
            ("Update", [-2.0, -1.0, 0.0, 3.0, -0.75, 1.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            ("Mul", [-1.0, 1.25, 0.0, 3.0, -0.75, 1.5, -1.25, -1.0, 36.0, 4.0, 10.0, 18.0]),
            ("Min", [-2.0, -1.25, 0.0, 3.0, -0.75, 1.5, -5.0, -4.0, -4.0, 1.0, 2.0, 3.0]),
            ("Max", [0.5, -1.0, 2.0, 3.0, -0.75, 1.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        ];
        for (kind, want) in cases {
            for form in [Form::Ref, Form::Resource] {
                let mgr = table(None);
                let out = step(&mgr, &scatter(kind, form, DType::F32), &["var"], &[indices.clone(), updates.clone()])
                    .unwrap();
                close(&values(&mgr, "var"), &want, 0.0);
                assert_eq!(out.len(), usize::from(form == Form::Ref));
            }
        }
        let mgr = table(None);
        let halves = Tensor::from_map([2, 2, 3], &(0..12).collect::<Vec<_>>(), |i| i as f32 - 5.5).unwrap();
        step(&mgr, &scatter("Div", Form::Resource, DType::F32), &["var"], &[indices.clone(), halves]).unwrap();
        #[rustfmt::skip]
        let want = [-0.20000000298023224, 0.8333333134651184, -4.0, 3.0, -0.75, 1.5, -0.09090909361839294, -0.018518518656492233, 0.4571428894996643, 0.2857142984867096, 0.4444444477558136, 0.5454545617103577];
        close(&values(&mgr, "var"), &want, 0.0);
        // A scalar update applies to every named row.
        let mgr = table(None);
        let scalar = [Tensor::from_slice::<i64>([2], &[1, 1]).unwrap(), Tensor::scalar(0.5f32)];
        step(&mgr, &scatter("Add", Form::Resource, DType::F32), &["var"], &scalar).unwrap();
        close(&values(&mgr, "var"), &[0.5, -1.25, 2.0, 4.0, 0.25, 2.5, 0.25, 0.125, -4.0, 1.0, 2.0, 3.0], 0.0);
    }

    #[test]
    fn scatter_edge_cases_follow_tf() {
        // Min and Max keep a NaN already there and ignore a NaN update.
        let mgr = ResourceMgr::default();
        variable(&mgr, "var", f32s(&[2, 2], &[1., f32::NAN, 3., 4.]));
        let indices = Tensor::from_slice::<i64>([2], &[0, 0]).unwrap();
        step(
            &mgr,
            &scatter("Max", Form::Ref, DType::F32),
            &["var"],
            &[indices.clone(), f32s(&[2, 2], &[f32::NAN, 1., 5., f32::NAN])],
        )
        .unwrap();
        let got = values(&mgr, "var");
        assert!(got[0] == 5.0 && got[1].is_nan() && got[2..] == [3.0, 4.0], "{got:?}");
        // Integers and bools.
        let mgr = ResourceMgr::default();
        variable(&mgr, "ints", Tensor::from_slice::<i32>([2, 2], &[1, 2, 3, 4]).unwrap());
        let add = scatter("Add", Form::Ref, DType::I32);
        step(
            &mgr,
            &add,
            &["ints"],
            &[Tensor::from_slice::<i64>([1], &[1]).unwrap(), Tensor::from_slice::<i32>([1, 2], &[5, 5]).unwrap()],
        )
        .unwrap();
        assert_eq!(mgr.lookup("", "ints").unwrap().read().unwrap().as_slice::<i32>().unwrap(), &[1, 2, 8, 9]);
        variable(&mgr, "flags", Tensor::from_slice::<bool>([2], &[true, false]).unwrap());
        let update = scatter("Update", Form::Resource, DType::Bool);
        step(
            &mgr,
            &update,
            &["flags"],
            &[Tensor::from_slice::<i64>([1], &[1]).unwrap(), Tensor::from_slice::<bool>([1], &[true]).unwrap()],
        )
        .unwrap();
        assert_eq!(mgr.lookup("", "flags").unwrap().read().unwrap().as_slice::<bool>().unwrap(), &[true, true]);
        assert!(step(&mgr, &scatter("Add", Form::Resource, DType::Bool), &["flags"], &[]).is_err(), "Add is numeric");
        // Zero divisors: the resource form refuses them for every type, the
        // ref form divides floats (TF's would crash on integers).
        let zero_row = || Tensor::from_slice::<i32>([1, 2], &[0, 1]).unwrap();
        let one = || Tensor::from_slice::<i64>([1], &[1]).unwrap();
        let err = step(&mgr, &scatter("Div", Form::Ref, DType::I32), &["ints"], &[one(), zero_row()]).unwrap_err();
        assert_eq!(err.message, "updates must not contain 0");
        variable(&mgr, "floats", f32s(&[2, 2], &[1., 2., 3., 4.]));
        let zero_f = || f32s(&[1, 2], &[0., 1.]);
        let err = step(&mgr, &scatter("Div", Form::Resource, DType::F32), &["floats"], &[one(), zero_f()]).unwrap_err();
        assert_eq!(err.message, "updates must not contain 0");
        step(&mgr, &scatter("Div", Form::Ref, DType::F32), &["floats"], &[one(), zero_f()]).unwrap();
        assert_eq!(values(&mgr, "floats"), [1.0, 2.0, f64::INFINITY, 4.0]);
        // Empty indices do nothing.
        let none = [Tensor::from_slice::<i64>([0], &[]).unwrap(), f32s(&[0, 2], &[])];
        step(&mgr, &scatter("Add", Form::Resource, DType::F32), &["floats"], &none).unwrap();
        assert_eq!(values(&mgr, "floats"), [1.0, 2.0, f64::INFINITY, 4.0]);
    }

    #[test]
    fn scatter_errors_match_tf() {
        let mgr = table(None);
        let run = |form: Form, indices: &[i64], index_shape: &[usize], updates: Tensor| {
            let indices = Tensor::from_slice::<i64>(index_shape, indices).unwrap();
            step(&mgr, &scatter("Add", form, DType::F32), &["var"], &[indices, updates]).unwrap_err()
        };
        for form in [Form::Ref, Form::Resource] {
            let err = run(form, &[0, 4], &[1, 2], Tensor::zeros(DType::F32, [1, 2, 3]).unwrap());
            assert_eq!(err.message, "indices[0,1] = 4 is not in [0, 4)");
            let err = run(form, &[-1], &[1], Tensor::zeros(DType::F32, [1, 3]).unwrap());
            assert_eq!(err.message, "indices[0] = -1 is not in [0, 4)");
            let err = run(form, &[7], &[], Tensor::zeros(DType::F32, [3]).unwrap());
            assert_eq!(err.message, "indices = 7 is not in [0, 4)");
            let err = run(form, &[0, 1], &[2], Tensor::zeros(DType::F32, [2, 2]).unwrap());
            assert_eq!(
                err.message,
                "Must have updates.shape = indices.shape + params.shape[1:] or updates.shape = [], got updates.shape [2,2], indices.shape [2], params.shape [4,3]"
            );
        }
        let err = run(Form::Resource, &[0, 1], &[2], Tensor::zeros(DType::F32, [3, 3]).unwrap());
        assert_eq!(err.message, "The shape of indices ([2]) must be a prefix of the shape of updates ([3,3])");
        close(&values(&mgr, "var"), &TABLE.map(f64::from), 0.0);
        variable(&mgr, "scalar", Tensor::scalar(1.0f32));
        let args = [Tensor::from_slice::<i64>([1], &[0]).unwrap(), Tensor::scalar(1.0f32)];
        let err = step(&mgr, &scatter("Add", Form::Ref, DType::F32), &["scalar"], &args).unwrap_err();
        assert_eq!(err.message, "params must be at least 1-D, got shape []");
        mgr.lookup_or_create("", "fresh", DType::F32).unwrap();
        let args = [Tensor::from_slice::<i64>([1], &[0]).unwrap(), Tensor::scalar(1.0f32)];
        let err = step(&mgr, &scatter("Update", Form::Ref, DType::F32), &["fresh"], &args).unwrap_err();
        assert_eq!(err.code, Code::FailedPrecondition);
    }

    /// Rows [1, 0] of a [2, 3] table, or [4, 1, 4] (a repeat) of a vector.
    fn rows_of(n: usize) -> Tensor {
        if n == 2 {
            Tensor::from_slice::<i32>([2], &[1, 0]).unwrap()
        } else {
            Tensor::from_slice::<i32>([3], &[4, 1, 4]).unwrap()
        }
    }

    #[test]
    fn rmsprop_and_adadelta_rows_match_tf() {
        use crate::ops::training::optimizer::tests::{all_close, f, op, three_runs};
        // Rows [1, 0] of a [2, 3] table, then rows [4, 1, 4] (a repeat) of a
        // vector; TensorFlow 2.21's ResourceSparseApply* kernels.
        for (shape, rows, want) in [(&[2usize, 3][..], 2, &ADADELTA[..3]), (&[6][..], 3, &ADADELTA[3..])] {
            let idx = rows_of(rows);
            let node = op("ResourceSparseApplyAdadelta", DType::F32).attr("Tindices", ty(DType::I32));
            let got = three_runs(&node, shape, &[("accum", 0.1), ("update", 0.2)], Some(rows), |g| {
                vec![f(1.0), f(0.95), f(1e-6), g, idx.clone()]
            });
            all_close(&got, want, 0.0);
        }
        for (shape, rows, want) in [(&[2usize, 3][..], 2, &RMSPROP[..3]), (&[6][..], 3, &RMSPROP[3..])] {
            let idx = rows_of(rows);
            let node = op("SparseApplyRMSProp", DType::F32).attr("Tindices", ty(DType::I32));
            let got = three_runs(&node, shape, &[("ms", 0.5), ("mom", 0.0)], Some(rows), |g| {
                vec![f(0.1), f(0.9), f(0.5), f(1e-6), g, idx.clone()]
            });
            all_close(&got, want, 0.0);
        }
        for (shape, rows, want) in [(&[2usize, 3][..], 2, &CENTERED[..4]), (&[6][..], 3, &CENTERED[4..])] {
            let idx = rows_of(rows);
            let node = op("ResourceSparseApplyCenteredRMSProp", DType::F32).attr("Tindices", ty(DType::I32));
            let got = three_runs(&node, shape, &[("mg", 0.05), ("ms", 0.5), ("mom", 0.0)], Some(rows), |g| {
                vec![f(0.1), f(0.9), f(0.5), f(1e-6), g, idx.clone()]
            });
            all_close(&got, want, 0.0);
        }
    }

    #[rustfmt::skip]
    const ADADELTA: &[&[f64]] = &[
            &[-0.7508320808410645, -0.24977755546569824, 1.4319987297058105, 2.304716110229492, -1.9057438373565674, 2.708070993423462],
            &[0.40557631850242615, 0.1617937684059143, 0.13070251047611237, 0.2250637710094452, 0.1310112476348877, 0.2798038125038147],
            &[0.336393266916275, 0.28013497591018677, 0.2498885691165924, 0.3137330114841461, 0.24022328853607178, 0.30804958939552307],
            &[0.5, -2.4057438373565674, 2.0, 3.0, -0.26242509484291077, 1.5],
            &[0.10000000149011612, 0.1310112476348877, 0.10000000149011612, 0.10000000149011612, 0.3849211037158966, 0.10000000149011612],
            &[0.20000000298023224, 0.24022328853607178, 0.20000000298023224, 0.20000000298023224, 0.4088011682033539, 0.20000000298023224],
        ];
    #[rustfmt::skip]
    const RMSPROP: &[&[f64]] = &[
            &[0.34130024909973145, -1.1553943157196045, 1.9507946968078613, 2.791316509246826, -0.889795184135437, 1.7540369033813477],
            &[1.0026850700378418, 0.5138500332832336, 0.4486500024795532, 0.6318100094795227, 0.45436495542526245, 0.7318000793457031],
            &[0.23887516558170319, -0.15801945328712463, 0.07793547958135605, -0.002499707043170929, 0.14550453424453735, -0.09865988045930862],
            &[0.5, -1.3897953033447266, 2.0, 3.0, -0.7470780611038208, 1.5],
            &[0.5, 0.45436495542526245, 0.5, 0.5, 0.8178509473800659, 0.5],
            &[0.0, 0.14550453424453735, 0.0, 0.0, -0.06485114246606827, 0.0],
        ];
    #[rustfmt::skip]
    const CENTERED: &[&[f64]] = &[
            &[0.33253854513168335, -1.1558349132537842, 1.9499421119689941, 2.7826461791992188, -0.8925853967666626, 1.7571972608566284],
            &[0.2585500478744507, -0.060050029307603836, 0.08385001122951508, 0.09955001622438431, 0.1327500194311142, -0.1182500422000885],
            &[1.0026850700378418, 0.5138500332832336, 0.4486500024795532, 0.6318100094795227, 0.45436495542526245, 0.7318000793457031],
            &[0.24763832986354828, -0.15846648812294006, 0.07848662883043289, -0.00015880167484283447, 0.148219496011734, -0.0997970774769783],
            &[0.5, -1.3925853967666626, 2.0, 3.0, -0.7633198499679565, 1.5],
            &[0.05000000074505806, 0.1327500194311142, 0.05000000074505806, 0.05000000074505806, -0.071490079164505, 0.05000000074505806],
            &[0.5, 0.45436495542526245, 0.5, 0.5, 0.8178509473800659, 0.5],
            &[0.0, 0.148219496011734, 0.0, 0.0, -0.06391454488039017, 0.0],
        ];
}
