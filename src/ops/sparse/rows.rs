//! Sparse ops that move entries without computing on their values:
//! - `SparseFillEmptyRows`: every row of the dense shape that holds no
//!   entry gets one, `[row, 0, ...]` with the default value; entries come
//!   out grouped by row (rows ascending, each row's entries in input
//!   order), with a per-row "was empty" flag and where each input entry
//!   went. `SparseFillEmptyRowsGrad` routes gradients back: each input
//!   entry's from where it went, the default value's the sum of the rest.
//! - `SparseReshape`: new coordinates for the same row-major positions
//!   (one `-1` dimension inferred).
//! - `SparseReorder`: entries sorted into row-major order (stable).
//! - `SparseSlice`: the entries inside `[start, start + size)`, shifted
//!   to the slice's origin, in input order.
//! - `SparseConcat`: entries of several sparse tensors along one
//!   dimension, offset, in row-major order.
//!
//! Owns: these kernels and their signatures. Must not hold state.

use super::{FILL, Indices, SparseOperand, indices_tensor, pick_elements, shape_vector, strides};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_count};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("SparseFillEmptyRows", fill_signature, build_fill),
    OpDef::kernel("SparseFillEmptyRowsGrad", fill_grad_signature, build_fill_grad),
    OpDef::kernel("SparseReshape", reshape_signature, build_reshape),
    OpDef::kernel("SparseReorder", reorder_signature, build_reorder),
    OpDef::kernel("SparseSlice", slice_signature, build_slice),
    OpDef::kernel("SparseConcat", concat_signature, build_concat),
];

const I64: ValueType = ValueType::Tensor(DType::I64);

fn values_type(node: &NodeSpec) -> Result<ValueType> {
    Ok(ValueType::Tensor(node.attr_dtype("T")?))
}

// ---------------------------------------------------------------------------
// SparseFillEmptyRows

/// `[int64, T, int64, T] -> [int64, T, bool, int64]`.
fn fill_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = values_type(node)?;
    Ok(OpSignature::new(vec![I64, t, I64, t], vec![I64, t, ValueType::Tensor(DType::Bool), I64]))
}

fn build_fill(_: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(fill_empty_rows))
}

fn fill_empty_rows(ctx: &mut OpContext<'_>) -> Result<()> {
    let sparse = SparseOperand::read(ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, "")?;
    let default = ctx.input(3)?;
    if default.rank() != 0 {
        bail!(invalid_argument, "default_value must be a scalar, got shape {}", default.shape());
    }
    if default.dtype() != sparse.values.dtype() {
        bail!(invalid_argument, "default_value is {} but values are {}", default.dtype(), sparse.values.dtype());
    }
    let (indices, rank) = (&sparse.indices, sparse.indices.rank);
    if rank == 0 {
        bail!(invalid_argument, "dense_shape must have at least one dimension");
    }
    let rows = sparse.shape[0];
    let mut per_row = vec![0usize; rows.max(0) as usize];
    for i in 0..indices.count {
        let row = indices.row(i)[0];
        if row < 0 || row >= rows {
            bail!(invalid_argument, "indices({i}, 0) is invalid: {row} >= {rows}");
        }
        per_row[row as usize] += 1;
    }
    // Where each row's entries start in the output (an empty row takes one).
    let mut starts = Vec::with_capacity(per_row.len());
    let mut total = 0usize;
    for &n in &per_row {
        starts.push(total);
        total += n.max(1);
    }
    let mut out_indices = vec![0i64; total * rank];
    let mut picks = vec![FILL; total];
    let mut reverse = vec![0i64; indices.count];
    let mut next = starts.clone();
    for (i, slot) in reverse.iter_mut().enumerate() {
        let row = indices.row(i)[0] as usize;
        let at = next[row];
        next[row] += 1;
        out_indices[at * rank..(at + 1) * rank].copy_from_slice(indices.row(i));
        picks[at] = i;
        *slot = at as i64;
    }
    let empty: Vec<bool> = per_row.iter().map(|&n| n == 0).collect();
    for (row, &start) in starts.iter().enumerate() {
        if empty[row] {
            out_indices[start * rank] = row as i64;
        }
    }
    let values = pick_elements(sparse.values, &picks, Some(default))?;
    ctx.set_output(0, indices_tensor(out_indices, total, rank)?);
    ctx.set_output(1, values);
    ctx.set_output(2, Tensor::from_slice::<bool>([empty.len()].as_slice(), &empty)?);
    ctx.set_output(3, Tensor::from_slice::<i64>([reverse.len()].as_slice(), &reverse)?);
    Ok(())
}

/// `[int64, T] -> [T, T]`.
fn fill_grad_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = values_type(node)?;
    Ok(OpSignature::new(vec![I64, t], vec![t, t]))
}

fn build_fill_grad(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute = match dtype {
        DType::F32 => fill_grad::<f32>,
        DType::F64 => fill_grad::<f64>,
        DType::I32 => fill_grad::<i32>,
        DType::I64 => fill_grad::<i64>,
        _ => return Err(crate::ops::unsupported_dtype(&init.node.op, dtype, crate::ops::math::REAL)),
    };
    Ok(FnKernel::boxed(compute))
}

fn fill_grad<T: crate::ops::numeric::Num>(ctx: &mut OpContext<'_>) -> Result<()> {
    let (map, grad) = (ctx.input(0)?, ctx.input(1)?);
    if map.rank() != 1 || grad.rank() != 1 {
        bail!(
            invalid_argument,
            "reverse_index_map and grad_values must be vectors, got shapes {} and {}",
            map.shape(),
            grad.shape()
        );
    }
    let map = map.as_slice::<i64>()?;
    let grad = grad.as_slice::<T>()?;
    let mut used = vec![false; grad.len()];
    let mut d_values = Vec::with_capacity(map.len());
    for (i, &at) in map.iter().enumerate() {
        let Some(&g) = usize::try_from(at).ok().and_then(|a| grad.get(a)) else {
            bail!(
                invalid_argument,
                "Elements in reverse index must be in [0, {}) but got reverse_index_map[{i}] = {at}",
                grad.len()
            );
        };
        used[at as usize] = true;
        d_values.push(g);
    }
    let d_default = grad.iter().zip(&used).filter(|(_, u)| !**u).fold(T::ZERO, |acc, (&g, _)| acc.add(g));
    ctx.set_output(0, Tensor::from_slice::<T>([d_values.len()].as_slice(), &d_values)?);
    ctx.set_output(1, Tensor::scalar(d_default));
    Ok(())
}

// ---------------------------------------------------------------------------
// SparseReshape

/// `[int64, int64, int64] -> [int64, int64]`.
fn reshape_signature(_: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![I64, I64, I64], vec![I64, I64]))
}

fn build_reshape(_: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(sparse_reshape))
}

fn show(dims: &[i64]) -> String {
    dims.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

fn sparse_reshape(ctx: &mut OpContext<'_>) -> Result<()> {
    let indices = Indices::read(ctx.input(0)?, "input_indices")?;
    let input_shape = shape_vector(ctx.input(1)?, "input_shape")?;
    let requested = shape_vector(ctx.input(2)?, "new_shape")?;
    if input_shape.len() != indices.rank {
        bail!(
            invalid_argument,
            "input_indices have {} columns but input_shape has {} dimensions",
            indices.rank,
            input_shape.len()
        );
    }
    let dense: i64 = input_shape.iter().try_fold(1i64, |acc, &d| acc.checked_mul(d)).unwrap_or(i64::MAX);
    let mut output = requested.clone();
    let mut unknown = None;
    let mut product = 1i64;
    for (d, &size) in requested.iter().enumerate() {
        if size == -1 {
            if let Some(first) = unknown {
                bail!(invalid_argument, "only one output dimension may be -1, not both {first} and {d}");
            }
            unknown = Some(d);
            output[d] = 1;
        } else if size < 0 {
            bail!(invalid_argument, "size {d} must be non-negative, not {size}");
        } else {
            product = product.saturating_mul(size);
        }
    }
    if let Some(d) = unknown {
        if product == 0 {
            bail!(
                invalid_argument,
                "reshape cannot infer the missing input size for an empty tensor unless all specified input sizes are non-zero"
            );
        }
        let missing = dense / product;
        if missing * product != dense {
            bail!(
                invalid_argument,
                "Input to reshape is a SparseTensor with {dense} dense values, but the requested shape requires a multiple of {product}. input_shape=[{}] output_shape=[{}]",
                show(&input_shape),
                show(&output)
            );
        }
        output[d] = missing;
    } else if product != dense {
        bail!(
            invalid_argument,
            "Input to reshape is a tensor with {dense} dense values, but the requested shape has {product}. input_shape=[{}] output_shape=[{}]",
            show(&input_shape),
            show(&output)
        );
    }
    let (from, to) = (strides(&input_shape), strides(&output));
    let rank = output.len();
    let mut flat = Vec::with_capacity(indices.count * rank);
    for i in 0..indices.count {
        let mut position: i64 = indices.row(i).iter().zip(&from).map(|(&c, &s)| c.wrapping_mul(s)).sum();
        for &stride in &to {
            let c = if stride == 0 { 0 } else { position / stride };
            flat.push(c);
            position -= c.wrapping_mul(stride);
        }
    }
    ctx.set_output(0, indices_tensor(flat, indices.count, rank)?);
    ctx.set_output(1, Tensor::from_slice::<i64>([rank].as_slice(), &output)?);
    Ok(())
}

// ---------------------------------------------------------------------------
// SparseReorder

/// `[int64, T, int64] -> [int64, T]`.
fn reorder_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = values_type(node)?;
    Ok(OpSignature::new(vec![I64, t, I64], vec![I64, t]))
}

fn build_reorder(_: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(sparse_reorder))
}

fn sparse_reorder(ctx: &mut OpContext<'_>) -> Result<()> {
    let sparse = SparseOperand::read(ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, "input_")?;
    let indices = &sparse.indices;
    let mut order: Vec<usize> = (0..indices.count).collect();
    // Coordinates compare lexicographically: row-major order.
    order.sort_by(|&a, &b| indices.row(a).cmp(indices.row(b)));
    let flat: Vec<i64> = order.iter().flat_map(|&i| indices.row(i).iter().copied()).collect();
    let out_indices = indices_tensor(flat, indices.count, indices.rank)?;
    let values = pick_elements(sparse.values, &order, None)?;
    ctx.set_output(0, out_indices);
    ctx.set_output(1, values);
    Ok(())
}

// ---------------------------------------------------------------------------
// SparseSlice

/// `[int64, T, int64, int64, int64] -> [int64, T, int64]`.
fn slice_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = values_type(node)?;
    Ok(OpSignature::new(vec![I64, t, I64, I64, I64], vec![I64, t, I64]))
}

fn build_slice(_: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(sparse_slice))
}

fn sparse_slice(ctx: &mut OpContext<'_>) -> Result<()> {
    let sparse = SparseOperand::read(ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, "")?;
    let start = shape_vector(ctx.input(3)?, "start")?;
    let size = shape_vector(ctx.input(4)?, "size")?;
    let rank = sparse.indices.rank;
    if start.len() != rank || size.len() != rank {
        bail!(
            invalid_argument,
            "start and size must have one element per dimension ({rank}), got {} and {}",
            start.len(),
            size.len()
        );
    }
    if let Some(d) = (0..rank).find(|&d| start[d] < 0 || size[d] < 0) {
        bail!(invalid_argument, "start[{d}] = {} and size[{d}] = {} must be non-negative", start[d], size[d]);
    }
    let end: Vec<i64> = (0..rank).map(|d| start[d].saturating_add(size[d]).min(sparse.shape[d])).collect();
    let out_shape: Vec<i64> = (0..rank).map(|d| (end[d] - start[d]).max(0)).collect();
    let mut picks = Vec::new();
    let mut flat = Vec::new();
    for i in 0..sparse.indices.count {
        let row = sparse.indices.row(i);
        if row.iter().enumerate().all(|(d, &c)| c >= start[d] && c < end[d]) {
            picks.push(i);
            flat.extend(row.iter().zip(&start).map(|(&c, &s)| c - s));
        }
    }
    let values = pick_elements(sparse.values, &picks, None)?;
    ctx.set_output(0, indices_tensor(flat, picks.len(), rank)?);
    ctx.set_output(1, values);
    ctx.set_output(2, Tensor::from_slice::<i64>([rank].as_slice(), &out_shape)?);
    Ok(())
}

// ---------------------------------------------------------------------------
// SparseConcat

/// `[int64 * N, T * N, int64 * N] -> [int64, T, int64]`.
fn concat_signature(node: &NodeSpec) -> Result<OpSignature> {
    let n = attr_count(node, "N", 2)?;
    let t = values_type(node)?;
    let mut inputs = vec![I64; n];
    inputs.extend(std::iter::repeat_n(t, n));
    inputs.extend(std::iter::repeat_n(I64, n));
    Ok(OpSignature::new(inputs, vec![I64, t, I64]))
}

struct SparseConcatKernel {
    n: usize,
    concat_dim: i64,
}

fn build_concat(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(SparseConcatKernel {
        n: attr_count(init.node, "N", 2)?,
        concat_dim: init.node.attr_int("concat_dim")?,
    }))
}

impl OpKernel for SparseConcatKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let n = self.n;
        let mut parts = Vec::with_capacity(n);
        for k in 0..n {
            let part = SparseOperand::read(ctx.input(k)?, ctx.input(n + k)?, ctx.input(2 * n + k)?, "")
                .map_err(|e| e.context(format!("input {k}")))?;
            parts.push(part);
        }
        let rank = parts[0].shape.len();
        let dim = if self.concat_dim < 0 { self.concat_dim + rank as i64 } else { self.concat_dim };
        if dim < 0 || dim >= rank as i64 {
            bail!(
                invalid_argument,
                "Concat dimension must be in range [{}, {rank}), got {}",
                -(rank as i64),
                self.concat_dim
            );
        }
        let dim = dim as usize;
        let mut out_shape = parts[0].shape.clone();
        out_shape[dim] = 0;
        let mut offsets = Vec::with_capacity(n);
        let dtype = parts[0].values.dtype();
        for (k, part) in parts.iter().enumerate() {
            if part.shape.len() != rank {
                bail!(
                    invalid_argument,
                    "Ranks of all input tensors must match: expected {rank} but got {} at position {k}",
                    part.shape.len()
                );
            }
            if part.values.dtype() != dtype {
                bail!(invalid_argument, "values of input {k} are {} but input 0's are {dtype}", part.values.dtype());
            }
            for d in (0..rank).filter(|&d| d != dim) {
                if part.shape[d] != parts[0].shape[d] {
                    bail!(
                        invalid_argument,
                        "Input shapes must match: expected {} for dimension {d} but got {} at position {k}",
                        parts[0].shape[d],
                        part.shape[d]
                    );
                }
            }
            offsets.push(out_shape[dim]);
            out_shape[dim] += part.shape[dim];
        }
        // Every entry, offset along the concat dimension, then sorted
        // row-major (stable): TensorFlow's output order.
        let mut entries: Vec<(Vec<i64>, usize, usize)> = Vec::new();
        for (k, part) in parts.iter().enumerate() {
            for i in 0..part.indices.count {
                let mut row = part.indices.row(i).to_vec();
                row[dim] += offsets[k];
                entries.push((row, k, i));
            }
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let flat: Vec<i64> = entries.iter().flat_map(|e| e.0.iter().copied()).collect();
        // Values: concatenated, then picked in the sorted order.
        let mut firsts = Vec::with_capacity(n);
        let mut total = 0;
        for part in &parts {
            firsts.push(total);
            total += part.indices.count;
        }
        let all = concat_values(&parts.iter().map(|p| p.values).collect::<Vec<_>>())?;
        let picks: Vec<usize> = entries.iter().map(|&(_, k, i)| firsts[k] + i).collect();
        ctx.set_output(0, indices_tensor(flat, entries.len(), rank)?);
        ctx.set_output(1, pick_elements(&all, &picks, None)?);
        ctx.set_output(2, Tensor::from_slice::<i64>([rank].as_slice(), &out_shape)?);
        Ok(())
    }
}

/// Value vectors of one dtype, end to end.
fn concat_values(values: &[&Tensor]) -> Result<Tensor> {
    let total: usize = values.iter().map(|v| v.num_elements()).sum();
    if values[0].dtype() == DType::String {
        let mut all: Vec<&[u8]> = Vec::with_capacity(total);
        for v in values {
            all.extend(v.strings()?.iter());
        }
        return Tensor::from_strings([total].as_slice(), &all);
    }
    let mut bytes = Vec::new();
    for v in values {
        bytes.extend_from_slice(v.as_bytes());
    }
    Tensor::from_bytes(values[0].dtype(), [total].as_slice(), &bytes)
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

    #[test]
    fn fill_empty_rows_matches_tensorflow() {
        // TensorFlow 2.21's outputs for the same call.
        let out = run_all(
            &f32_node("SparseFillEmptyRows"),
            &[
                i64s(&[4, 2], &[3, 1, 1, 0, 1, 2, 0, 0]),
                f32s(&[4], &[1., 2., 3., 4.]),
                i64s(&[2], &[5, 3]),
                Tensor::scalar(-1f32),
            ],
        )
        .unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), [0, 0, 1, 0, 1, 2, 2, 0, 3, 1, 4, 0]);
        assert_eq!(out[1].as_slice::<f32>().unwrap(), [4., 2., 3., -1., 1., -1.]);
        assert_eq!(out[2].as_slice::<bool>().unwrap(), [false, false, true, false, true]);
        assert_eq!(out[3].as_slice::<i64>().unwrap(), [4, 1, 2, 0]);
        let strings = node("SparseFillEmptyRows").attr("T", ty(DType::String));
        let out = run_all(
            &strings,
            &[
                i64s(&[1, 2], &[1, 0]),
                Tensor::from_strings([1].as_slice(), &["a"]).unwrap(),
                i64s(&[2], &[3, 3]),
                Tensor::string_scalar("z"),
            ],
        )
        .unwrap();
        let got: Vec<&[u8]> = out[1].strings().unwrap().iter().collect();
        assert_eq!(got, [b"z".as_slice(), b"a", b"z"]);
        let e = run_all(
            &f32_node("SparseFillEmptyRows"),
            &[i64s(&[1, 2], &[7, 1]), f32s(&[1], &[1.]), i64s(&[2], &[5, 3]), Tensor::scalar(-1f32)],
        )
        .unwrap_err();
        assert!(e.message.contains("indices(0, 0) is invalid: 7 >= 5"), "{e}");
        let grad = run_all(
            &f32_node("SparseFillEmptyRowsGrad"),
            &[i64s(&[4], &[3, 1, 2, 0]), f32s(&[6], &[1., 2., 3., 4., 5., 6.])],
        );
        let grad = grad.unwrap();
        assert_eq!(grad[0].as_slice::<f32>().unwrap(), [4., 2., 3., 1.]);
        assert_eq!(grad[1].as_slice::<f32>().unwrap(), [11.]);
    }

    #[test]
    fn reshape_matches_tensorflow_and_names_bad_shapes() {
        let reshape = node("SparseReshape");
        let out = run_all(&reshape, &[i64s(&[3, 2], &[0, 1, 1, 2, 2, 0]), i64s(&[2], &[3, 4]), i64s(&[2], &[2, -1])])
            .unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), [0, 1, 1, 0, 1, 2]);
        assert_eq!(out[1].as_slice::<i64>().unwrap(), [2, 6]);
        let e = run_all(&reshape, &[i64s(&[1, 2], &[0, 1]), i64s(&[2], &[3, 4]), i64s(&[2], &[5, -1])]).unwrap_err();
        assert!(e.message.contains("requires a multiple of 5. input_shape=[3,4] output_shape=[5,1]"), "{e}");
        let e = run_all(&reshape, &[i64s(&[1, 2], &[0, 1]), i64s(&[2], &[3, 4]), i64s(&[2], &[-1, -1])]).unwrap_err();
        assert!(e.message.contains("not both 0 and 1"), "{e}");
        let out = run_all(&reshape, &[i64s(&[0, 2], &[]), i64s(&[2], &[0, 4]), i64s(&[2], &[-1, 2])]).unwrap();
        assert_eq!(out[1].as_slice::<i64>().unwrap(), [0, 2]);
    }

    #[test]
    fn reorder_slice_and_concat_match_tensorflow() {
        let out = run_all(
            &f32_node("SparseReorder"),
            &[i64s(&[4, 2], &[1, 0, 0, 2, 0, 1, 1, 0]), f32s(&[4], &[1., 2., 3., 4.]), i64s(&[2], &[2, 3])],
        )
        .unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), [0, 1, 0, 2, 1, 0, 1, 0]);
        assert_eq!(out[1].as_slice::<f32>().unwrap(), [3., 2., 1., 4.]);
        let out = run_all(
            &f32_node("SparseSlice"),
            &[
                i64s(&[4, 2], &[0, 0, 1, 2, 2, 1, 3, 3]),
                f32s(&[4], &[1., 2., 3., 4.]),
                i64s(&[2], &[4, 4]),
                i64s(&[2], &[1, 1]),
                i64s(&[2], &[2, 5]),
            ],
        )
        .unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), [0, 1, 1, 0]);
        assert_eq!(out[1].as_slice::<f32>().unwrap(), [2., 3.]);
        assert_eq!(out[2].as_slice::<i64>().unwrap(), [2, 3]);
        let concat = f32_node("SparseConcat").attr("N", AttrValue::Int(2)).attr("concat_dim", AttrValue::Int(-1));
        let inputs = [
            i64s(&[2, 2], &[0, 1, 1, 0]),
            i64s(&[2, 2], &[0, 0, 1, 1]),
            f32s(&[2], &[1., 2.]),
            f32s(&[2], &[3., 4.]),
            i64s(&[2], &[2, 2]),
            i64s(&[2], &[2, 3]),
        ];
        let out = run_all(&concat, &inputs).unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), [0, 1, 0, 2, 1, 0, 1, 3]);
        assert_eq!(out[1].as_slice::<f32>().unwrap(), [1., 3., 2., 4.]);
        assert_eq!(out[2].as_slice::<i64>().unwrap(), [2, 5]);
        let mut bad = inputs.clone();
        bad[5] = i64s(&[2], &[3, 3]);
        let e = run_all(&concat, &bad).unwrap_err();
        assert!(e.message.contains("expected 2 for dimension 0 but got 3 at position 1"), "{e}");
    }
}
