//! Arithmetic on sparse tensors:
//! - `SparseTensorDenseMatMul`: sparse `[m, k]` times dense `[k, n]`
//!   (either adjoint), each entry adding its value times a row of the
//!   dense operand, in entry order;
//! - `SparseTensorDenseAdd`: a dense tensor plus the entries;
//! - `SparseDenseCwiseAdd`/`Mul`/`Div`: each entry's value with the dense
//!   operand's element at its coordinates (the dense side broadcast to
//!   the sparse shape, never the other way);
//! - `SparseAdd`: two sparse tensors merged as if both were sorted
//!   (TensorFlow's merge, so unsorted operands give TensorFlow's output),
//!   a sum whose magnitude is below `thresh` dropped;
//! - `SparseSparseMaximum`/`Minimum`: the same merge, a missing side
//!   counting as zero;
//! - `SparseAddGrad`: each operand entry's share of the sum's gradient;
//! - `SparseReduceSum`/`SparseReduceMax` (and their `*Sparse` forms, the
//!   occupied results only, as a sparse tensor): a dense result over the kept
//!   dimensions, each position reducing the entries that fall in it
//!   (positions with none are zero: implicit zeros take no part);
//! - `SparseSoftmax`: softmax over the last dimension among the entries
//!   that share their other coordinates.
//!
//! Owns: these kernels and their signatures. Must not hold state.

use super::{Indices, SparseOperand, indices_tensor, strides};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::math::{FLOAT, REAL};
use crate::ops::numeric::{Float, Num};
use crate::ops::registry::OpDef;
use crate::ops::{
    ComputeFn, FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or, index_values,
    unsupported_dtype,
};
use crate::tensor::{DType, Shape, Tensor};
use std::cmp::Ordering;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("SparseTensorDenseMatMul", matmul_signature, build_matmul),
    OpDef::kernel("SparseTensorDenseAdd", dense_add_signature, build_dense_add),
    OpDef::kernel("SparseDenseCwiseAdd", cwise_signature, build_cwise::<AddOp>),
    OpDef::kernel("SparseDenseCwiseMul", cwise_signature, build_cwise::<MulOp>),
    OpDef::kernel("SparseDenseCwiseDiv", cwise_signature, build_cwise::<DivOp>),
    OpDef::kernel("SparseAdd", sparse_add_signature, build_sparse_add),
    OpDef::kernel("SparseAddGrad", sparse_add_grad_signature, build_sparse_add_grad),
    OpDef::kernel("SparseSparseMaximum", sparse_pair_signature, build_sparse_pair::<MaxOp>),
    OpDef::kernel("SparseSparseMinimum", sparse_pair_signature, build_sparse_pair::<MinOp>),
    OpDef::kernel("SparseReduceSum", reduce_signature, build_reduce::<SumReduce>),
    OpDef::kernel("SparseReduceMax", reduce_signature, build_reduce::<MaxReduce>),
    OpDef::kernel("SparseReduceSumSparse", sparse_reduce_signature, build_reduce::<SumReduce>),
    OpDef::kernel("SparseReduceMaxSparse", sparse_reduce_signature, build_reduce::<MaxReduce>),
    OpDef::kernel("SparseSoftmax", softmax_signature, build_softmax),
];

const I64: ValueType = ValueType::Tensor(DType::I64);

fn t_of(node: &NodeSpec) -> Result<ValueType> {
    Ok(ValueType::Tensor(node.attr_dtype("T")?))
}

/// Picks the compute function for a real dtype.
macro_rules! real_kernel {
    ($init:expr, $f:ident $(:: <$($g:ty),*>)?) => {{
        let dtype = $init.node.attr_dtype("T")?;
        let compute: ComputeFn = match dtype {
            DType::F32 => $f::<$($($g,)*)? f32>,
            DType::F64 => $f::<$($($g,)*)? f64>,
            DType::I32 => $f::<$($($g,)*)? i32>,
            DType::I64 => $f::<$($($g,)*)? i64>,
            _ => return Err(unsupported_dtype(&$init.node.op, dtype, REAL)),
        };
        Ok(FnKernel::boxed(compute))
    }};
}

// ---------------------------------------------------------------------------
// SparseTensorDenseMatMul

/// `[Tindices, T, int64, T] -> [T]`.
fn matmul_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    let idx = ValueType::Tensor(attr_index_type_or(node, "Tindices", DType::I64)?);
    Ok(OpSignature::new(vec![idx, t, I64, t], vec![t]))
}

struct MatMul {
    compute: fn(&mut OpContext<'_>, bool, bool) -> Result<()>,
    adjoint_a: bool,
    adjoint_b: bool,
}

fn build_matmul(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute = match dtype {
        DType::F32 => matmul::<f32>,
        DType::F64 => matmul::<f64>,
        DType::I32 => matmul::<i32>,
        DType::I64 => matmul::<i64>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, REAL)),
    };
    Ok(Box::new(MatMul {
        compute,
        adjoint_a: init.node.attr_bool_or("adjoint_a", false)?,
        adjoint_b: init.node.attr_bool_or("adjoint_b", false)?,
    }))
}

impl OpKernel for MatMul {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        (self.compute)(ctx, self.adjoint_a, self.adjoint_b)
    }
}

fn matmul<T: Num>(ctx: &mut OpContext<'_>, adjoint_a: bool, adjoint_b: bool) -> Result<()> {
    let (a_indices, a_values, a_shape, b) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, ctx.input(3)?);
    if a_indices.rank() != 2 || a_indices.dims()[1] != 2 {
        bail!(
            invalid_argument,
            "a_indices should be a matrix of [nnz, 2] coordinates, got shape {}",
            a_indices.shape()
        );
    }
    let nnz = a_indices.dims()[0];
    if a_values.rank() != 1 || a_values.dims()[0] != nnz {
        bail!(invalid_argument, "a_values should be a vector of {nnz} values, got shape {}", a_values.shape());
    }
    let shape = index_values(a_shape, "a_shape")?;
    if shape.len() != 2 || b.rank() != 2 {
        bail!(
            invalid_argument,
            "Tensor 'a_shape' and 'b' must be matrices: got a_shape of {} elements and b of shape {}",
            shape.len(),
            b.shape()
        );
    }
    let (rows, cols) = (shape[0].max(0) as usize, shape[1].max(0) as usize);
    let (m, k) = if adjoint_a { (cols, rows) } else { (rows, cols) };
    let (b_rows, b_cols) = (b.dims()[0], b.dims()[1]);
    let (b_k, n) = if adjoint_b { (b_cols, b_rows) } else { (b_rows, b_cols) };
    if k != b_k {
        bail!(
            invalid_argument,
            "Cannot multiply A and B because inner dimension does not match: {k} vs. {b_k}.  Did you forget a transpose?  Dimensions of A: [{rows}, {cols}).  Dimensions of B: [{b_rows},{b_cols}]"
        );
    }
    let coords = index_values(a_indices, "a_indices")?;
    let values = a_values.as_slice::<T>()?;
    let b = b.as_slice::<T>()?;
    let (row_col, k_col) = if adjoint_a { (1, 0) } else { (0, 1) };
    for i in 0..nnz {
        let (r, c) = (coords[2 * i + row_col], coords[2 * i + k_col]);
        if r < 0 || r as usize >= m {
            bail!(invalid_argument, "m ({r}) from index[{i},{row_col}] out of bounds (>={m})");
        }
        if c < 0 || c as usize >= k {
            bail!(invalid_argument, "k ({c}) from index[{i},{k_col}] out of bounds (>={k})");
        }
    }
    let out = Tensor::build::<T>([m, n].as_slice(), |out| {
        out.fill(T::ZERO);
        for (i, &v) in values.iter().enumerate() {
            let (r, c) = (coords[2 * i + row_col] as usize, coords[2 * i + k_col] as usize);
            let row = &mut out[r * n..(r + 1) * n];
            if adjoint_b {
                for (j, o) in row.iter_mut().enumerate() {
                    *o = o.add(v.mul(b[j * b_cols + c]));
                }
            } else {
                for (o, &x) in row.iter_mut().zip(&b[c * n..(c + 1) * n]) {
                    *o = o.add(v.mul(x));
                }
            }
        }
    })?;
    ctx.set_output(0, out);
    Ok(())
}

// ---------------------------------------------------------------------------
// SparseTensorDenseAdd

/// `[Tindices, T, Tindices, T] -> [T]`.
fn dense_add_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    let idx = ValueType::Tensor(attr_index_type_or(node, "Tindices", DType::I64)?);
    Ok(OpSignature::new(vec![idx, t, idx, t], vec![t]))
}

fn build_dense_add(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    real_kernel!(init, dense_add)
}

fn dense_add<T: Num>(ctx: &mut OpContext<'_>) -> Result<()> {
    let (a_indices, a_values, a_shape, b) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, ctx.input(3)?);
    let shape = index_values(a_shape, "a_shape")?;
    if a_indices.rank() != 2 || a_indices.dims()[1] != shape.len() {
        bail!(
            invalid_argument,
            "a_indices should be a matrix of [nnz, {}] coordinates, got shape {}",
            shape.len(),
            a_indices.shape()
        );
    }
    let nnz = a_indices.dims()[0];
    if a_values.rank() != 1 || a_values.dims()[0] != nnz {
        bail!(invalid_argument, "a_values should be a vector of {nnz} values, got shape {}", a_values.shape());
    }
    if shape.len() != b.rank() || shape.iter().zip(b.dims()).any(|(&s, &d)| s != d as i64) {
        let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
        bail!(invalid_argument, "Dimension mismatch: a_shape [{}] vs. b's shape {}", dims.join(","), b.shape());
    }
    let coords = index_values(a_indices, "a_indices")?;
    let rank = shape.len();
    let stride = strides(&shape);
    let mut positions = Vec::with_capacity(nnz);
    for i in 0..nnz {
        let row = &coords[i * rank..(i + 1) * rank];
        if row.iter().zip(shape.iter()).any(|(&c, &n)| c < 0 || c >= n) {
            let parts: Vec<String> = row.iter().map(i64::to_string).collect();
            bail!(invalid_argument, "a_indices[{i}] = [{}] is out of bounds of a_shape", parts.join(","));
        }
        positions.push(row.iter().zip(&stride).map(|(&c, &s)| c * s).sum::<i64>() as usize);
    }
    let values = a_values.as_slice::<T>()?;
    let mut out = b.as_slice::<T>()?.to_vec();
    for (&p, &v) in positions.iter().zip(values) {
        out[p] = out[p].add(v);
    }
    ctx.set_output(0, Tensor::from_slice::<T>(b.dims(), &out)?);
    Ok(())
}

// ---------------------------------------------------------------------------
// SparseDenseCwise*

/// `[int64, T, int64, T] -> [T]`.
fn cwise_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    Ok(OpSignature::new(vec![I64, t, I64, t], vec![t]))
}

/// An elementwise operation of an entry's value with a dense element.
trait CwiseOp: 'static {
    const NAME: &'static str;
    const REFUSES_ZERO: bool = false;
    fn apply<T: Num>(sparse: T, dense: T) -> T;
}

struct AddOp;
impl CwiseOp for AddOp {
    const NAME: &'static str = "SparseDenseCwiseAdd";
    fn apply<T: Num>(s: T, d: T) -> T {
        s.add(d)
    }
}

struct MulOp;
impl CwiseOp for MulOp {
    const NAME: &'static str = "SparseDenseCwiseMul";
    fn apply<T: Num>(s: T, d: T) -> T {
        s.mul(d)
    }
}

struct DivOp;
impl CwiseOp for DivOp {
    const NAME: &'static str = "SparseDenseCwiseDiv";
    const REFUSES_ZERO: bool = true;
    fn apply<T: Num>(s: T, d: T) -> T {
        s.div(d)
    }
}

fn build_cwise<O: CwiseOp>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    real_kernel!(init, cwise::<O>)
}

fn cwise<O: CwiseOp, T: Num>(ctx: &mut OpContext<'_>) -> Result<()> {
    let sparse = SparseOperand::read(ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, "sp_")?;
    let dense = ctx.input(3)?;
    let (shape, rank) = (&sparse.shape, sparse.indices.rank);
    let dense_dims = dense.dims();
    // The dense side aligns with the sparse shape's last dimensions; each
    // of its dimensions matches or is 1.
    let fits = dense_dims.len() <= rank
        && dense_dims.iter().rev().zip(shape.iter().rev()).all(|(&d, &s)| d == 1 || d as i64 == s);
    if !fits {
        let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
        bail!(
            invalid_argument,
            "{} broadcasts dense to sparse only; got incompatible shapes: [{}] vs. {}",
            O::NAME,
            dims.join(","),
            dense.shape()
        );
    }
    let dense_values = dense.as_slice::<T>()?;
    if O::REFUSES_ZERO && dense_values.contains(&T::ZERO) {
        bail!(invalid_argument, "{} cannot divide by zero, but input dense tensor contains zero", O::NAME);
    }
    sparse.check_bounds("sp_")?;
    let lead = rank - dense_dims.len();
    let dense_shape: Vec<i64> = dense_dims.iter().map(|&d| d as i64).collect();
    let stride = strides(&dense_shape);
    let values = sparse.values.as_slice::<T>()?;
    let mut out = Vec::with_capacity(values.len());
    for (i, &v) in values.iter().enumerate() {
        let row = &sparse.indices.row(i)[lead..];
        let at: i64 =
            row.iter().zip(&dense_shape).zip(&stride).map(|((&c, &d), &s)| if d == 1 { 0 } else { c * s }).sum();
        out.push(O::apply(v, dense_values[at as usize]));
    }
    ctx.set_output(0, Tensor::from_slice::<T>([out.len()].as_slice(), &out)?);
    Ok(())
}

// ---------------------------------------------------------------------------
// SparseAdd and SparseSparseMaximum/Minimum: TensorFlow's merge

/// The merge of two entry lists in row-major order: `Both(i, j)` for
/// equal coordinates, `A(i)`/`B(j)` for an entry of one side only.
enum Merged {
    A(usize),
    B(usize),
    Both(usize, usize),
}

fn merge(a: &Indices<'_>, b: &Indices<'_>) -> Vec<Merged> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(a.count + b.count);
    while i < a.count && j < b.count {
        match a.row(i).cmp(b.row(j)) {
            Ordering::Less => {
                out.push(Merged::A(i));
                i += 1;
            }
            Ordering::Greater => {
                out.push(Merged::B(j));
                j += 1;
            }
            Ordering::Equal => {
                out.push(Merged::Both(i, j));
                i += 1;
                j += 1;
            }
        }
    }
    out.extend((i..a.count).map(Merged::A));
    out.extend((j..b.count).map(Merged::B));
    out
}

fn check_same_shape(a: &SparseOperand<'_>, b: &SparseOperand<'_>) -> Result<()> {
    if a.shape.len() != b.shape.len() {
        bail!(
            invalid_argument,
            "Operands do not have the same ranks; got ranks {} and {}",
            a.shape.len(),
            b.shape.len()
        );
    }
    for (d, (&x, &y)) in a.shape.iter().zip(&b.shape).enumerate() {
        if x != y {
            bail!(invalid_argument, "Operands' shapes do not match: got {x} and {y} for dimension {d}");
        }
    }
    Ok(())
}

fn merged_indices(a: &Indices<'_>, b: &Indices<'_>, kept: &[&Merged]) -> Result<Tensor> {
    let rank = a.rank;
    let mut flat = Vec::with_capacity(kept.len() * rank);
    for m in kept {
        flat.extend_from_slice(match m {
            Merged::A(i) | Merged::Both(i, _) => a.row(*i),
            Merged::B(j) => b.row(*j),
        });
    }
    indices_tensor(flat, kept.len(), rank)
}

/// `[int64, T, int64, int64, T, int64, Treal] -> [int64, T, int64]`.
fn sparse_add_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    let treal = ValueType::Tensor(node.attr_dtype_or("Treal", node.attr_dtype("T")?)?);
    Ok(OpSignature::new(vec![I64, t, I64, I64, t, I64, treal], vec![I64, t, I64]))
}

fn build_sparse_add(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    real_kernel!(init, sparse_add)
}

fn sparse_add<T: Num>(ctx: &mut OpContext<'_>) -> Result<()> {
    let a = SparseOperand::read(ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, "a_")?;
    let b = SparseOperand::read(ctx.input(3)?, ctx.input(4)?, ctx.input(5)?, "b_")?;
    check_same_shape(&a, &b)?;
    let thresh = ctx.input(6)?;
    if thresh.rank() != 0 {
        bail!(invalid_argument, "The magnitude threshold must be a scalar, got shape {}", thresh.shape());
    }
    let thresh = thresh.to_f64_vec()[0];
    let (av, bv) = (a.values.as_slice::<T>()?, b.values.as_slice::<T>()?);
    let merged = merge(&a.indices, &b.indices);
    let mut kept = Vec::with_capacity(merged.len());
    let mut values = Vec::with_capacity(merged.len());
    for m in &merged {
        let v = match *m {
            Merged::A(i) => av[i],
            Merged::B(j) => bv[j],
            Merged::Both(i, j) => {
                let s = av[i].add(bv[j]);
                if s.abs().to_f64() < thresh {
                    continue;
                }
                s
            }
        };
        kept.push(m);
        values.push(v);
    }
    let out_indices = merged_indices(&a.indices, &b.indices, &kept)?;
    let out_shape = Tensor::from_slice::<i64>([a.shape.len()].as_slice(), &a.shape)?;
    ctx.set_output(0, out_indices);
    ctx.set_output(1, Tensor::from_slice::<T>([values.len()].as_slice(), &values)?);
    ctx.set_output(2, out_shape);
    Ok(())
}

/// `[int64, T, int64, int64, T, int64] -> [int64, T]`.
fn sparse_pair_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    Ok(OpSignature::new(vec![I64, t, I64, I64, t, I64], vec![I64, t]))
}

trait PairOp: 'static {
    fn apply<T: Num>(a: T, b: T) -> T;
}

struct MaxOp;
impl PairOp for MaxOp {
    fn apply<T: Num>(a: T, b: T) -> T {
        a.max_nan(b)
    }
}

struct MinOp;
impl PairOp for MinOp {
    fn apply<T: Num>(a: T, b: T) -> T {
        a.min_nan(b)
    }
}

fn build_sparse_pair<O: PairOp>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    real_kernel!(init, sparse_pair::<O>)
}

fn sparse_pair<O: PairOp, T: Num>(ctx: &mut OpContext<'_>) -> Result<()> {
    let a = SparseOperand::read(ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, "a_")?;
    let b = SparseOperand::read(ctx.input(3)?, ctx.input(4)?, ctx.input(5)?, "b_")?;
    check_same_shape(&a, &b)?;
    let (av, bv) = (a.values.as_slice::<T>()?, b.values.as_slice::<T>()?);
    let merged = merge(&a.indices, &b.indices);
    let values: Vec<T> = merged
        .iter()
        .map(|m| match *m {
            Merged::A(i) => O::apply(av[i], T::ZERO),
            Merged::B(j) => O::apply(T::ZERO, bv[j]),
            Merged::Both(i, j) => O::apply(av[i], bv[j]),
        })
        .collect();
    let kept: Vec<&Merged> = merged.iter().collect();
    let out_indices = merged_indices(&a.indices, &b.indices, &kept)?;
    ctx.set_output(0, out_indices);
    ctx.set_output(1, Tensor::from_slice::<T>([values.len()].as_slice(), &values)?);
    Ok(())
}

// ---------------------------------------------------------------------------
// SparseAddGrad

/// `[T, int64, int64, int64] -> [T, T]`.
fn sparse_add_grad_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    Ok(OpSignature::new(vec![t, I64, I64, I64], vec![t, t]))
}

fn build_sparse_add_grad(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: ComputeFn = match dtype {
        DType::F32 => sparse_add_grad::<f32>,
        DType::F64 => sparse_add_grad::<f64>,
        DType::I32 => sparse_add_grad::<i32>,
        DType::I64 => sparse_add_grad::<i64>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, REAL)),
    };
    Ok(FnKernel::boxed(compute))
}

/// Each operand entry's gradient is the sum's at the same index (zero
/// where the sum dropped it below `thresh`).
fn sparse_add_grad<T: Num>(ctx: &mut OpContext<'_>) -> Result<()> {
    let grad = ctx.input(0)?;
    let a = Indices::read(ctx.input(1)?, "a_indices")?;
    let b = Indices::read(ctx.input(2)?, "b_indices")?;
    let sum = Indices::read(ctx.input(3)?, "sum_indices")?;
    if grad.rank() != 1 {
        bail!(invalid_argument, "backprop_val_grad should be a vector but received shape {}", grad.shape());
    }
    if grad.num_elements() != sum.count {
        bail!(
            invalid_argument,
            "# elements of backprop_val_grad and # rows of sum_indices should match (#nnz of sum): got {} and {}",
            grad.num_elements(),
            sum.count
        );
    }
    if a.rank != b.rank || a.rank != sum.rank {
        bail!(
            invalid_argument,
            "The densified operands should have the same ndims; for A, B, sum got: {}{}{}",
            a.rank,
            b.rank,
            sum.rank
        );
    }
    let g = grad.as_slice::<T>()?;
    let at: std::collections::HashMap<&[i64], usize> = (0..sum.count).map(|i| (sum.row(i), i)).collect();
    let pick =
        |ix: &Indices<'_>| -> Vec<T> { (0..ix.count).map(|i| at.get(ix.row(i)).map_or(T::ZERO, |&j| g[j])).collect() };
    let (ga, gb) = (pick(&a), pick(&b));
    ctx.set_output(0, Tensor::from_slice::<T>([ga.len()].as_slice(), &ga)?);
    ctx.set_output(1, Tensor::from_slice::<T>([gb.len()].as_slice(), &gb)?);
    Ok(())
}

// ---------------------------------------------------------------------------
// SparseReduceSum / SparseReduceMax

/// `[int64, T, int64, int32] -> [T]`.
fn reduce_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    Ok(OpSignature::new(vec![I64, t, I64, ValueType::Tensor(DType::I32)], vec![t]))
}

/// `[int64, T, int64, int32] -> [int64 indices, T values, int64 shape]`.
fn sparse_reduce_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    Ok(OpSignature::new(vec![I64, t, I64, ValueType::Tensor(DType::I32)], vec![I64, t, I64]))
}

trait Reduce: 'static {
    fn first<T: Num>(x: T) -> T {
        x
    }
    fn fold<T: Num>(acc: T, x: T) -> T;
}

struct SumReduce;
impl Reduce for SumReduce {
    fn fold<T: Num>(acc: T, x: T) -> T {
        acc.add(x)
    }
}

struct MaxReduce;
impl Reduce for MaxReduce {
    fn fold<T: Num>(acc: T, x: T) -> T {
        acc.max_nan(x)
    }
}

struct SparseReduce {
    compute: fn(&mut OpContext<'_>, bool, bool) -> Result<()>,
    keep_dims: bool,
    /// `Sparse*Sparse`: the occupied results as a sparse tensor.
    sparse_out: bool,
}

impl OpKernel for SparseReduce {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        (self.compute)(ctx, self.keep_dims, self.sparse_out)
    }
}

fn build_reduce<R: Reduce>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute = match dtype {
        DType::F32 => reduce::<R, f32>,
        DType::F64 => reduce::<R, f64>,
        DType::I32 => reduce::<R, i32>,
        DType::I64 => reduce::<R, i64>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, REAL)),
    };
    let keep_dims = init.node.attr_bool_or("keep_dims", false)?;
    Ok(Box::new(SparseReduce { compute, keep_dims, sparse_out: init.node.op.ends_with("Sparse") }))
}

fn reduce<R: Reduce, T: Num>(ctx: &mut OpContext<'_>, keep_dims: bool, sparse_out: bool) -> Result<()> {
    let sparse = SparseOperand::read(ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, "input_")?;
    let rank = sparse.shape.len();
    let mut reduced = vec![false; rank];
    for &axis in index_values(ctx.input(3)?, "reduction_axes")?.iter() {
        let d = if axis < 0 { axis + rank as i64 } else { axis };
        if d < 0 || d >= rank as i64 {
            bail!(invalid_argument, "Invalid reduction dimension {axis}, for input with {rank} dimensions.");
        }
        reduced[d as usize] = true;
    }
    sparse.check_bounds("input_")?;
    let kept: Vec<i64> = (0..rank).filter(|&d| !reduced[d]).map(|d| sparse.shape[d]).collect();
    let stride = strides(&kept);
    let total: usize = kept.iter().map(|&d| d.max(0) as usize).product();
    let values = sparse.values.as_slice::<T>()?;
    if sparse_out {
        // Occupied results only, in row-major order (TensorFlow's), so a
        // huge dense shape costs nothing.
        let mut occupied: std::collections::BTreeMap<i64, T> = std::collections::BTreeMap::new();
        for (i, &v) in values.iter().enumerate() {
            let row = sparse.indices.row(i);
            let at: i64 = (0..rank).filter(|&d| !reduced[d]).zip(&stride).map(|(d, &s)| row[d] * s).sum();
            occupied.entry(at).and_modify(|acc| *acc = R::fold(*acc, v)).or_insert_with(|| R::first(v));
        }
        let out_rank = if keep_dims { rank } else { kept.len() };
        let mut flat = Vec::with_capacity(occupied.len() * out_rank);
        for &at in occupied.keys() {
            let mut k = 0;
            for &is_reduced in &reduced {
                if is_reduced {
                    if keep_dims {
                        flat.push(0);
                    }
                } else {
                    flat.push(at / stride[k] % kept[k].max(1));
                    k += 1;
                }
            }
        }
        let shape: Vec<i64> =
            if keep_dims { (0..rank).map(|d| if reduced[d] { 1 } else { sparse.shape[d] }).collect() } else { kept };
        let out: Vec<T> = occupied.into_values().collect();
        let count = out.len();
        ctx.set_output(0, super::indices_tensor(flat, count, out_rank)?);
        ctx.set_output(1, Tensor::from_slice::<T>([count].as_slice(), &out)?);
        ctx.set_output(2, Tensor::from_slice::<i64>([shape.len()].as_slice(), &shape)?);
        return Ok(());
    }
    let mut slots: Vec<Option<T>> = vec![None; total];
    for (i, &v) in values.iter().enumerate() {
        let row = sparse.indices.row(i);
        let at: i64 = (0..rank).filter(|&d| !reduced[d]).zip(&stride).map(|(d, &s)| row[d] * s).sum();
        let slot = &mut slots[at as usize];
        *slot = Some(match *slot {
            None => R::first(v),
            Some(acc) => R::fold(acc, v),
        });
    }
    let dims: Vec<usize> = if keep_dims {
        (0..rank).map(|d| if reduced[d] { 1 } else { sparse.shape[d] as usize }).collect()
    } else {
        kept.iter().map(|&d| d as usize).collect()
    };
    let out: Vec<T> = slots.into_iter().map(|s| s.unwrap_or(T::ZERO)).collect();
    ctx.set_output(0, Tensor::from_slice::<T>(Shape::from_vec(dims), &out)?);
    Ok(())
}

// ---------------------------------------------------------------------------
// SparseSoftmax

/// `[int64, T, int64] -> [T]`.
fn softmax_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = t_of(node)?;
    Ok(OpSignature::new(vec![I64, t, I64], vec![t]))
}

fn build_softmax(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: ComputeFn = match dtype {
        DType::F32 => softmax::<f32>,
        DType::F64 => softmax::<f64>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, FLOAT)),
    };
    Ok(FnKernel::boxed(compute))
}

fn softmax<T: Float>(ctx: &mut OpContext<'_>) -> Result<()> {
    let sparse = SparseOperand::read(ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, "sp_")?;
    let rank = sparse.indices.rank;
    if rank < 2 {
        bail!(invalid_argument, "Input should have rank >= 2, but received shape {:?}", sparse.shape);
    }
    let values = sparse.values.as_slice::<T>()?;
    // Entries grouped by their leading coordinates, each group in entry order.
    let mut groups: std::collections::BTreeMap<&[i64], Vec<usize>> = std::collections::BTreeMap::new();
    for i in 0..sparse.indices.count {
        groups.entry(&sparse.indices.row(i)[..rank - 1]).or_default().push(i);
    }
    let mut out = vec![T::ZERO; values.len()];
    for members in groups.values() {
        let max = members.iter().map(|&i| values[i]).fold(T::BOTTOM, |m, x| if x > m { x } else { m });
        let mut sum = T::ZERO;
        for &i in members {
            out[i] = values[i].sub(max).exp();
            sum = sum.add(out[i]);
        }
        for &i in members {
            out[i] = out[i].div(sum);
        }
    }
    ctx.set_output(0, Tensor::from_slice::<T>([out.len()].as_slice(), &out)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{f32s, i64s};
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::run_all;
    use crate::ops::testing::{node, ty};
    use crate::tensor::{DType, Tensor};

    fn f32_node(op: &str) -> crate::graph::spec::NodeSpec {
        node(op).attr("T", ty(DType::F32))
    }
    fn first_f32(op: &crate::graph::spec::NodeSpec, inputs: &[Tensor]) -> Vec<f32> {
        run_all(op, inputs).unwrap()[0].as_slice::<f32>().unwrap().to_vec()
    }
    fn b32() -> Tensor {
        f32s(&[3, 2], &[0., 1., 2., 3., 4., 5.])
    }

    /// TensorFlow 2.21: an entry the sum dropped gets no gradient.
    #[test]
    fn sparse_add_grad_follows_the_sum_indices() {
        let n = f32_node("SparseAddGrad");
        let (a, b, sum) =
            (i64s(&[3, 2], &[0, 0, 1, 1, 2, 0]), i64s(&[2, 2], &[0, 0, 1, 0]), i64s(&[3, 2], &[0, 0, 1, 0, 2, 0]));
        let outs = run_all(&n, &[f32s(&[3], &[10.0, 20.0, 30.0]), a.clone(), b, sum.clone()]).unwrap();
        assert_eq!(outs[0].as_slice::<f32>().unwrap(), &[10.0, 0.0, 30.0]);
        assert_eq!(outs[1].as_slice::<f32>().unwrap(), &[10.0, 20.0]);
        let err = run_all(&n, &[f32s(&[3], &[1.0; 3]), a, i64s(&[1, 1], &[0]), sum]).unwrap_err();
        assert!(err.message.contains("for A, B, sum got: 212"), "{err}");
    }

    /// TensorFlow 2.21's `tf.sparse.reduce_sum(.., output_is_sparse=True)`.
    #[test]
    fn sparse_outputs_keep_occupied_results_in_order() {
        let node = |op: &str, keep: bool| f32_node(op).attr("keep_dims", AttrValue::Bool(keep));
        let input = |axes: &[i32]| {
            vec![
                i64s(&[5, 3], &[0, 1, 0, 1, 0, 2, 1, 1, 1, 0, 1, 2, 2, 0, 0]),
                f32s(&[5], &[1.0, -2.0, 3.0, -1.0, 5.0]),
                i64s(&[3], &[3, 2, 3]),
                Tensor::from_slice::<i32>([axes.len()].as_slice(), axes).unwrap(),
            ]
        };
        let run = |op: &str, keep: bool, axes: &[i32]| {
            let outs = run_all(&node(op, keep), &input(axes)).unwrap();
            (
                outs[0].as_slice::<i64>().unwrap().to_vec(),
                outs[1].to_f64_vec(),
                outs[2].as_slice::<i64>().unwrap().to_vec(),
            )
        };
        assert_eq!(
            run("SparseReduceSumSparse", false, &[2]),
            (vec![0, 1, 1, 0, 1, 1, 2, 0], vec![0.0, -2.0, 3.0, 5.0], vec![3, 2])
        );
        assert_eq!(run("SparseReduceSumSparse", false, &[0, 2]), (vec![0, 1], vec![3.0, 3.0], vec![2]));
        assert_eq!(run("SparseReduceSumSparse", false, &[0, 1, 2]).1, vec![6.0]);
        assert_eq!(run("SparseReduceSumSparse", false, &[0, 1, 2]).2, Vec::<i64>::new());
        assert_eq!(
            run("SparseReduceSumSparse", true, &[-1]),
            (vec![0, 1, 0, 1, 0, 0, 1, 1, 0, 2, 0, 0], vec![0.0, -2.0, 3.0, 5.0], vec![3, 2, 1])
        );
        assert_eq!(run("SparseReduceMaxSparse", false, &[1]).1, vec![1.0, -1.0, 3.0, -2.0, 5.0]);
    }

    #[test]
    fn matmul_and_dense_add_match_tensorflow() {
        // TensorFlow 2.21's outputs for the same calls.
        let a = [i64s(&[3, 2], &[0, 0, 1, 2, 0, 0]), f32s(&[3], &[2., 3., 4.]), i64s(&[2], &[2, 3])];
        let mm = f32_node("SparseTensorDenseMatMul");
        assert_eq!(first_f32(&mm, &[a[0].clone(), a[1].clone(), a[2].clone(), b32()]), [0., 6., 12., 15.]);
        let adj = mm.clone().attr("adjoint_a", AttrValue::Bool(true)).attr("adjoint_b", AttrValue::Bool(true));
        let two = [i64s(&[2, 2], &[0, 0, 1, 2]), f32s(&[2], &[2., 3.]), i64s(&[2], &[2, 3])];
        let out = first_f32(&adj, &[two[0].clone(), two[1].clone(), two[2].clone(), b32()]);
        assert_eq!(out, [0., 4., 8., 0., 0., 0., 3., 9., 15.]);
        let e = run_all(&mm, &[i64s(&[1, 2], &[0, 5]), f32s(&[1], &[2.]), i64s(&[2], &[2, 3]), b32()]).unwrap_err();
        assert!(e.message.contains("k (5) from index[0,1] out of bounds (>=3)"), "{e}");
        let e = run_all(&mm, &[i64s(&[1, 2], &[4, 0]), f32s(&[1], &[2.]), i64s(&[2], &[2, 3]), b32()]).unwrap_err();
        assert!(e.message.contains("m (4) from index[0,0] out of bounds (>=2)"), "{e}");
        let add = f32_node("SparseTensorDenseAdd");
        let ones = f32s(&[2, 3], &[1.; 6]);
        assert_eq!(first_f32(&add, &[a[0].clone(), a[1].clone(), a[2].clone(), ones]), [7., 1., 1., 1., 1., 4.]);
    }

    #[test]
    fn cwise_ops_broadcast_dense_to_sparse_only() {
        let sp = [i64s(&[2, 2], &[0, 0, 1, 2]), f32s(&[2], &[2., 3.]), i64s(&[2], &[2, 3])];
        let with = |dense: Tensor| [sp[0].clone(), sp[1].clone(), sp[2].clone(), dense];
        assert_eq!(first_f32(&f32_node("SparseDenseCwiseMul"), &with(f32s(&[3], &[1., 2., 3.]))), [2., 9.]);
        assert_eq!(first_f32(&f32_node("SparseDenseCwiseAdd"), &with(f32s(&[3], &[1., 2., 3.]))), [3., 6.]);
        assert_eq!(first_f32(&f32_node("SparseDenseCwiseDiv"), &with(f32s(&[2, 1], &[4., 2.]))), [0.5, 1.5]);
        let e = run_all(&f32_node("SparseDenseCwiseDiv"), &with(f32s(&[2, 1], &[0., 2.]))).unwrap_err();
        assert!(e.message.contains("cannot divide by zero"), "{e}");
        let e = run_all(&f32_node("SparseDenseCwiseMul"), &with(f32s(&[3, 3], &[1.; 9]))).unwrap_err();
        assert!(e.message.contains("broadcasts dense to sparse only; got incompatible shapes: [2,3] vs. [3,3]"), "{e}");
    }

    #[test]
    fn merges_match_tensorflow_even_unsorted() {
        let add = f32_node("SparseAdd").attr("Treal", ty(DType::F32));
        let out = run_all(
            &add,
            &[
                i64s(&[2, 2], &[0, 0, 1, 1]),
                f32s(&[2], &[1., 0.05]),
                i64s(&[2], &[2, 2]),
                i64s(&[2, 2], &[0, 0, 0, 1]),
                f32s(&[2], &[-0.99, 0.01]),
                i64s(&[2], &[2, 2]),
                Tensor::scalar(0.1f32),
            ],
        )
        .unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), [0, 1, 1, 1]);
        assert_eq!(out[1].as_slice::<f32>().unwrap(), [0.01, 0.05]);
        let out = run_all(
            &add,
            &[
                i64s(&[2, 2], &[1, 0, 0, 0]),
                f32s(&[2], &[1., 2.]),
                i64s(&[2], &[2, 2]),
                i64s(&[1, 2], &[0, 0]),
                f32s(&[1], &[1.]),
                i64s(&[2], &[2, 2]),
                Tensor::scalar(0f32),
            ],
        )
        .unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), [0, 0, 1, 0, 0, 0]);
        assert_eq!(out[1].as_slice::<f32>().unwrap(), [1., 1., 2.]);
        let e = run_all(
            &add,
            &[
                i64s(&[1, 2], &[0, 0]),
                f32s(&[1], &[1.]),
                i64s(&[2], &[2, 2]),
                i64s(&[1, 2], &[0, 0]),
                f32s(&[1], &[1.]),
                i64s(&[2], &[2, 3]),
                Tensor::scalar(0f32),
            ],
        )
        .unwrap_err();
        assert!(e.message.contains("got 2 and 3 for dimension 1"), "{e}");
        let pair = |op: &str| {
            run_all(
                &f32_node(op),
                &[
                    i64s(&[2, 2], &[0, 0, 1, 1]),
                    f32s(&[2], &[-1., 2.]),
                    i64s(&[2], &[2, 2]),
                    i64s(&[2, 2], &[0, 0, 0, 1]),
                    f32s(&[2], &[-3., -4.]),
                    i64s(&[2], &[2, 2]),
                ],
            )
            .unwrap()
        };
        let max = pair("SparseSparseMaximum");
        assert_eq!(max[0].as_slice::<i64>().unwrap(), [0, 0, 0, 1, 1, 1]);
        assert_eq!(max[1].as_slice::<f32>().unwrap(), [-1., 0., 2.]);
        assert_eq!(pair("SparseSparseMinimum")[1].as_slice::<f32>().unwrap(), [-3., -4., 0.]);
    }

    #[test]
    fn reductions_and_softmax_match_tensorflow() {
        let sp = [i64s(&[3, 2], &[0, 0, 0, 1, 2, 1]), f32s(&[3], &[-1., -2., -3.]), i64s(&[2], &[3, 2])];
        let with = |axes: &[i32]| {
            [
                sp[0].clone(),
                sp[1].clone(),
                sp[2].clone(),
                Tensor::from_slice::<i32>([axes.len()].as_slice(), axes).unwrap(),
            ]
        };
        assert_eq!(first_f32(&f32_node("SparseReduceMax"), &with(&[1])), [-1., 0., -3.]);
        assert_eq!(first_f32(&f32_node("SparseReduceMax"), &with(&[])), [-1., -2., 0., 0., 0., -3.]);
        let keep = f32_node("SparseReduceSum").attr("keep_dims", AttrValue::Bool(true));
        let out = run_all(&keep, &with(&[-1])).unwrap().remove(0);
        assert_eq!(out.dims(), [3, 1]);
        assert_eq!(out.as_slice::<f32>().unwrap(), [-3., 0., -3.]);
        let e = run_all(&keep, &with(&[2])).unwrap_err();
        assert!(e.message.contains("Invalid reduction dimension 2, for input with 2 dimensions."), "{e}");
        let soft = first_f32(
            &f32_node("SparseSoftmax"),
            &[i64s(&[3, 2], &[0, 0, 0, 2, 1, 1]), f32s(&[3], &[1., 2., 3.]), i64s(&[2], &[2, 3])],
        );
        assert_eq!(soft, [0.26894143, 0.7310586, 1.0]);
    }
}
