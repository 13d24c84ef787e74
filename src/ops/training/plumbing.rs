//! The shape and index ops gradient graphs are wired with:
//! - `BroadcastGradientArgs`: for two broadcast operands' shapes, the axes
//!   each operand's gradient is summed over (`r0`, `r1`);
//! - `ShapeN`: the shapes of N tensors;
//! - `ConcatOffset`: where each input of a concat starts (the gradient
//!   slices it back out);
//! - `InvertPermutation`: the inverse of a transpose's permutation;
//! - `DynamicStitch`, `ParallelDynamicStitch`: rows of N tensors scattered
//!   into one by index (reduction gradients build shapes with it);
//! - `PreventGradient`, `Snapshot`: the identity, on the forward pass.
//!
//! Owns: these kernels and their signatures, with TensorFlow's messages.
//! Must not hold state.

use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{
    ComputeFn, FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_count, attr_index_type_or,
    index_values,
};
use crate::tensor::{DType, Element, Shape, Tensor};
use smallvec::SmallVec;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("BroadcastGradientArgs", broadcast_gradient_args_signature, build_broadcast_gradient_args),
    OpDef::kernel("ShapeN", shape_n_signature, build_shape_n),
    OpDef::kernel("ConcatOffset", concat_offset_signature, build_concat_offset),
    OpDef::kernel("InvertPermutation", invert_permutation_signature, build_invert_permutation),
    OpDef::kernel("DynamicStitch", dynamic_stitch_signature, build_dynamic_stitch),
    OpDef::kernel("ParallelDynamicStitch", dynamic_stitch_signature, build_dynamic_stitch),
    OpDef::kernel("PreventGradient", identity_signature, build_identity),
    OpDef::kernel("Snapshot", identity_signature, build_identity),
];

type Axes = SmallVec<[i64; 8]>;

/// `values` as a vector of `dtype` (int32 or int64), or an error naming
/// `what` when a value does not fit int32.
fn index_vector(values: &[i64], dtype: DType, what: &str) -> Result<Tensor> {
    if dtype == DType::I64 {
        return Tensor::from_slice::<i64>([values.len()], values);
    }
    let narrow: Result<SmallVec<[i32; 8]>> = values
        .iter()
        .map(|&v| {
            i32::try_from(v).map_err(|_| {
                Status::invalid_argument(format!("{what} {v} does not fit the int32 output; use an int64 output type"))
            })
        })
        .collect();
    Tensor::from_slice::<i32>([values.len()], &narrow?)
}

// ---------------------------------------------------------------------------
// BroadcastGradientArgs

fn broadcast_gradient_args_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(attr_index_type_or(node, "T", DType::I32)?);
    Ok(OpSignature::new(vec![t, t], vec![t, t]))
}

fn build_broadcast_gradient_args(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    attr_index_type_or(init.node, "T", DType::I32)?;
    Ok(FnKernel::boxed(broadcast_gradient_args))
}

fn broadcast_gradient_args(ctx: &mut OpContext<'_>) -> Result<()> {
    let (s0, s1) = (ctx.input(0)?, ctx.input(1)?);
    for (i, s) in [s0, s1].into_iter().enumerate() {
        if s.rank() != 1 {
            bail!(invalid_argument, "In[{i}] must be a vector.{}", s.shape());
        }
    }
    let (x, y) = (index_values(s0, "s0")?, index_values(s1, "s1")?);
    let (r0, r1) = reduction_axes(&x, &y)?;
    let dtype = s0.dtype();
    ctx.set_output(0, index_vector(&r0, dtype, "axis")?);
    ctx.set_output(1, index_vector(&r1, dtype, "axis")?);
    Ok(())
}

/// The axes of the broadcast of shapes `x` and `y` that each must be
/// summed over, as TensorFlow's `BCast` computes them: identical shapes
/// need none; otherwise an operand sums every axis where it has (or is
/// padded with) 1, including axes where the output is 1 too.
pub fn reduction_axes(x: &[i64], y: &[i64]) -> Result<(Axes, Axes)> {
    let (mut r0, mut r1) = (Axes::new(), Axes::new());
    if x == y {
        return Ok((r0, r1));
    }
    let rank = x.len().max(y.len());
    let dim = |s: &[i64], axis: usize| if axis + s.len() >= rank { s[axis + s.len() - rank] } else { 1 };
    for axis in 0..rank {
        let (dx, dy) = (dim(x, axis), dim(y, axis));
        if dx != 1 && dy != 1 && dx != dy {
            let join = |s: &[i64]| s.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
            bail!(invalid_argument, "Incompatible shapes: [{}] vs. [{}]", join(x), join(y));
        }
        if dx == 1 {
            r0.push(axis as i64);
        }
        if dy == 1 {
            r1.push(axis as i64);
        }
    }
    Ok((r0, r1))
}

// ---------------------------------------------------------------------------
// ShapeN

fn shape_n_signature(node: &NodeSpec) -> Result<OpSignature> {
    let n = attr_count(node, "N", 1)?;
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let out = ValueType::Tensor(attr_index_type_or(node, "out_type", DType::I32)?);
    Ok(OpSignature::new(vec![t; n], vec![out; n]))
}

struct ShapeNKernel {
    out: DType,
}

fn build_shape_n(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(ShapeNKernel { out: attr_index_type_or(init.node, "out_type", DType::I32)? }))
}

impl OpKernel for ShapeNKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        for i in 0..ctx.num_inputs() {
            let dims: Axes = ctx.input(i)?.dims().iter().map(|&d| d as i64).collect();
            let shape = index_vector(&dims, self.out, "dimension")?;
            ctx.set_output(i, shape);
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// ConcatOffset

/// `[int32, N x shape_type] -> N x shape_type`.
fn concat_offset_signature(node: &NodeSpec) -> Result<OpSignature> {
    let n = attr_count(node, "N", 2)?;
    let s = ValueType::Tensor(attr_index_type_or(node, "shape_type", DType::I32)?);
    let mut inputs = vec![ValueType::Tensor(DType::I32)];
    inputs.extend(std::iter::repeat_n(s, n));
    Ok(OpSignature::new(inputs, vec![s; n]))
}

fn build_concat_offset(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    attr_index_type_or(init.node, "shape_type", DType::I32)?;
    Ok(FnKernel::boxed(concat_offset))
}

fn concat_offset(ctx: &mut OpContext<'_>) -> Result<()> {
    let concat_dim = ctx.input(0)?;
    if concat_dim.rank() != 0 {
        bail!(invalid_argument, "Concat dim tensor should be a scalar integer, but got shape {}", concat_dim.shape());
    }
    let cdim = concat_dim.as_slice::<i32>()?[0] as i64;
    let first = ctx.input(1)?;
    if first.rank() != 1 {
        bail!(invalid_argument, "input 0 should be a vector, but got shape {}", first.shape());
    }
    let shape0 = index_values(first, "shape")?;
    let rank = shape0.len() as i64;
    let axis = if cdim < 0 { cdim + rank } else { cdim };
    if !(0..rank).contains(&axis) {
        bail!(invalid_argument, "Concat dim is out of range: {cdim} vs. {rank}");
    }
    let axis = axis as usize;
    let spaced = |s: &[i64]| s.iter().map(i64::to_string).collect::<Vec<_>>().join(" ");
    let mut offset = 0i64;
    for i in 0..ctx.num_inputs() - 1 {
        let input = ctx.input(i + 1)?;
        let shape = index_values(input, "shape")?;
        if input.rank() != 1 || shape.len() != shape0.len() {
            bail!(invalid_argument, "input {i} should contain {rank} elements, but got {}", shape.len());
        }
        for (j, (&d, &d0)) in shape.iter().zip(&shape0).enumerate() {
            if j != axis && d != d0 {
                bail!(
                    invalid_argument,
                    "All dimensions except {axis} must match. Input {i} has shape [{}] and doesn't match input 0 with shape [{}].",
                    spaced(&shape),
                    spaced(&shape0)
                );
            }
        }
        let mut out: Axes = SmallVec::from_elem(0, shape.len());
        out[axis] = offset;
        offset += shape[axis];
        let out = index_vector(&out, input.dtype(), "offset")?;
        ctx.set_output(i, out);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// InvertPermutation

fn invert_permutation_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(attr_index_type_or(node, "T", DType::I32)?);
    Ok(OpSignature::new(vec![t], vec![t]))
}

fn build_invert_permutation(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    attr_index_type_or(init.node, "T", DType::I32)?;
    Ok(FnKernel::boxed(invert_permutation))
}

fn invert_permutation(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    if x.rank() != 1 {
        bail!(invalid_argument, "invert_permutation expects a 1D vector.");
    }
    let perm = index_values(x, "x")?;
    let n = perm.len();
    if x.dtype() == DType::I32 && n > i32::MAX as usize {
        bail!(invalid_argument, "permutation of nonnegative int32s must have <= int32 max elements");
    }
    let mut inverse = vec![-1i64; n];
    for (i, &d) in perm.iter().enumerate() {
        let Some(slot) = usize::try_from(d).ok().and_then(|d| inverse.get_mut(d)) else {
            bail!(invalid_argument, "{d} is not between 0 and {n}");
        };
        if *slot != -1 {
            bail!(invalid_argument, "{d} is duplicated in the input.");
        }
        *slot = i as i64;
    }
    let out = index_vector(&inverse, x.dtype(), "position")?;
    ctx.set_output(0, out);
    Ok(())
}

// ---------------------------------------------------------------------------
// DynamicStitch

/// `[N x int32, N x T] -> [T]`.
fn dynamic_stitch_signature(node: &NodeSpec) -> Result<OpSignature> {
    let n = attr_count(node, "N", 1)?;
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let mut inputs = vec![ValueType::Tensor(DType::I32); n];
    inputs.extend(std::iter::repeat_n(t, n));
    Ok(OpSignature::new(inputs, vec![t]))
}

fn build_dynamic_stitch(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::SecondHalf;
        return crate::ops::array::string_moves::build(init, "T", carriers, build_dynamic_stitch);
    }
    attr_count(init.node, "N", 1)?;
    let compute = crate::dispatch_dtype!(init.node.attr_dtype("T")?, T => dynamic_stitch::<T> as ComputeFn);
    Ok(FnKernel::boxed(compute))
}

/// Later inputs (and later rows within one) overwrite earlier ones at the
/// same index, as TensorFlow's CPU kernel does; rows no index names are
/// zero.
fn dynamic_stitch<T: Element>(ctx: &mut OpContext<'_>) -> Result<()> {
    let n = ctx.num_inputs() / 2;
    let (indices0, data0) = (ctx.input(0)?, ctx.input(n)?);
    let mut max_index = -1i64;
    for i in 0..n {
        let indices = ctx.input(i)?;
        if let Some(&m) = indices.as_slice::<i32>()?.iter().max() {
            max_index = max_index.max(m as i64);
        }
    }
    for i in 0..n {
        let (indices, data) = (ctx.input(i)?, ctx.input(n + i)?);
        if !data.dims().starts_with(indices.dims()) {
            bail!(
                invalid_argument,
                "data[{i}].shape = {} does not start with indices[{i}].shape = {}",
                data.shape(),
                indices.shape()
            );
        }
        if i > 0 && data.dims()[indices.rank()..] != data0.dims()[indices0.rank()..] {
            bail!(
                invalid_argument,
                "Need data[0].shape[{}:] = data[{i}].shape[{}:], got data[0].shape = {}, data[{i}].shape = {}, indices[0].shape = {}, indices[{i}].shape = {}",
                indices0.rank(),
                indices.rank(),
                data0.shape(),
                data.shape(),
                indices0.shape(),
                indices.shape()
            );
        }
    }
    let rows = (max_index + 1) as usize;
    let row_dims = &data0.dims()[indices0.rank()..];
    let inner: usize = row_dims.iter().product();
    let mut dims = Vec::with_capacity(row_dims.len() + 1);
    dims.push(rows);
    dims.extend_from_slice(row_dims);
    let parts: SmallVec<[(&[i32], &[T]); 4]> = (0..n)
        .map(|i| Ok((ctx.input(i)?.as_slice::<i32>()?, ctx.input(n + i)?.as_slice::<T>()?)))
        .collect::<Result<_>>()?;
    let mut bad = None;
    let out = Tensor::build::<T>(Shape::from_vec(dims), |out| {
        for &(indices, data) in &parts {
            for (k, &index) in indices.iter().enumerate() {
                let Ok(row) = usize::try_from(index) else {
                    bad = Some(k);
                    return;
                };
                if inner > 0 {
                    out[row * inner..(row + 1) * inner].copy_from_slice(&data[k * inner..(k + 1) * inner]);
                }
            }
        }
    })?;
    drop(parts);
    if let Some(k) = bad {
        bail!(invalid_argument, "indices[{k}] is out of range");
    }
    ctx.set_output(0, out);
    Ok(())
}

// ---------------------------------------------------------------------------
// PreventGradient, Snapshot

fn identity_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t], vec![t]))
}

/// Forwards its input: tensors are immutable, so a snapshot shares bytes.
fn build_identity(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(|ctx| {
        let value = ctx.take_input_value(0)?;
        ctx.set_output_value(0, value);
        Ok(())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};
    use crate::ops::{ResourceMgr, Value, run_kernel_once};

    fn i32s(shape: &[usize], v: &[i32]) -> Tensor {
        Tensor::from_slice::<i32>(shape, v).unwrap()
    }

    fn vec32(v: &[i32]) -> Tensor {
        i32s(&[v.len()], v)
    }

    fn run(n: &NodeSpec, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let values = inputs.iter().cloned().map(Value::Tensor).collect();
        run_kernel_once(n, values, &ResourceMgr::default())?.into_iter().map(Value::into_tensor).collect()
    }

    /// Two shapes, and the axes each one's gradient sums over.
    type ReductionCase<'a> = (&'a [i32], &'a [i32], &'a [i32], &'a [i32]);

    // Expected values: TensorFlow 2.21's BroadcastGradientArgs.
    #[test]
    fn broadcast_gradient_args_match_tf() {
        let cases: &[ReductionCase<'_>] = &[
            (&[2, 3, 1], &[1], &[2], &[0, 1, 2]),
            (&[2, 1], &[2, 1], &[], &[]),
            (&[1, 1], &[1, 1], &[], &[]),
            (&[], &[], &[], &[]),
            (&[2, 3], &[], &[], &[0, 1]),
            (&[], &[2, 3], &[0, 1], &[]),
            (&[5, 1, 4], &[3, 1], &[1], &[0, 2]),
            (&[1, 3], &[2, 1], &[0], &[1]),
            (&[0, 3], &[1, 3], &[], &[0]),
            (&[1], &[1, 1, 1], &[0, 1, 2], &[0, 1, 2]),
            (&[4, 1], &[1, 4, 1], &[0, 2], &[0, 2]),
            (&[-1, 3], &[3], &[], &[0]),
        ];
        let n = node("BroadcastGradientArgs");
        for &(x, y, r0, r1) in cases {
            let out = run(&n, &[vec32(x), vec32(y)]).unwrap();
            assert_eq!(out[0].as_slice::<i32>().unwrap(), r0, "r0 of {x:?} {y:?}");
            assert_eq!(out[1].as_slice::<i32>().unwrap(), r1, "r1 of {x:?} {y:?}");
        }
        let wide = node("BroadcastGradientArgs").attr("T", ty(DType::I64));
        let v64 = |v: &[i64]| Tensor::from_slice::<i64>([v.len()], v).unwrap();
        let out = run(&wide, &[v64(&[2, 1]), v64(&[3])]).unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), &[1]);
        assert_eq!(out[1].as_slice::<i64>().unwrap(), &[0]);
        let err = run(&n, &[vec32(&[2, 3]), vec32(&[4])]).unwrap_err();
        assert_eq!(err.message, "Incompatible shapes: [2,3] vs. [4]");
        let err = run(&n, &[i32s(&[1, 1], &[2]), vec32(&[2])]).unwrap_err();
        assert_eq!(err.message, "In[0] must be a vector.[1,1]");
    }

    #[test]
    fn shape_n_gives_every_shape() {
        let n = node("ShapeN").attr("T", ty(DType::F32)).attr("N", AttrValue::Int(2)).attr("out_type", ty(DType::I64));
        let out = run(&n, &[Tensor::zeros(DType::F32, [2, 3]).unwrap(), Tensor::scalar(1.0f32)]).unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), &[2, 3]);
        assert_eq!(out[1].dims(), &[0]);
        let n = node("ShapeN").attr("T", ty(DType::F32)).attr("N", AttrValue::Int(1));
        assert_eq!(run(&n, &[Tensor::zeros(DType::F32, [4]).unwrap()]).unwrap()[0].as_slice::<i32>().unwrap(), &[4]);
    }

    #[test]
    fn concat_offsets_match_tf() {
        let n = |count: i64| node("ConcatOffset").attr("N", AttrValue::Int(count));
        let shapes = [vec32(&[2, 3, 5]), vec32(&[2, 7, 5]), vec32(&[2, 1, 5])];
        let out = run(&n(3), &[&[Tensor::scalar(1i32)][..], &shapes].concat()).unwrap();
        let got: Vec<&[i32]> = out.iter().map(|t| t.as_slice::<i32>().unwrap()).collect();
        assert_eq!(got, [&[0, 0, 0][..], &[0, 3, 0], &[0, 10, 0]]);
        let out = run(&n(2), &[Tensor::scalar(-2i32), shapes[0].clone(), shapes[1].clone()]).unwrap();
        assert_eq!(out[1].as_slice::<i32>().unwrap(), &[0, 3, 0]);
        let wide = n(2).attr("shape_type", ty(DType::I64));
        let v64 = |v: &[i64]| Tensor::from_slice::<i64>([v.len()], v).unwrap();
        let out = run(&wide, &[Tensor::scalar(0i32), v64(&[2, 3]), v64(&[4, 3])]).unwrap();
        assert_eq!(out[1].as_slice::<i64>().unwrap(), &[2, 0]);
        let err = run(&n(2), &[Tensor::scalar(1i32), vec32(&[2, 3, 5]), vec32(&[3, 7, 5])]).unwrap_err();
        assert_eq!(
            err.message,
            "All dimensions except 1 must match. Input 1 has shape [3 7 5] and doesn't match input 0 with shape [2 3 5]."
        );
        let err = run(&n(2), &[Tensor::scalar(1i32), vec32(&[2, 3, 5]), vec32(&[3, 7])]).unwrap_err();
        assert_eq!(err.message, "input 1 should contain 3 elements, but got 2");
        let err = run(&n(2), &[Tensor::scalar(3i32), vec32(&[2, 3, 5]), vec32(&[2, 7, 5])]).unwrap_err();
        assert_eq!(err.message, "Concat dim is out of range: 3 vs. 3");
        let err = run(&n(2), &[vec32(&[1]), vec32(&[2, 3, 5]), vec32(&[2, 7, 5])]).unwrap_err();
        assert_eq!(err.message, "Concat dim tensor should be a scalar integer, but got shape [1]");
    }

    #[test]
    fn invert_permutation_matches_tf() {
        let n = node("InvertPermutation");
        assert_eq!(run1(&n, &[vec32(&[2, 0, 1])]).unwrap().as_slice::<i32>().unwrap(), &[1, 2, 0]);
        let wide = node("InvertPermutation").attr("T", ty(DType::I64));
        let out = run1(&wide, &[Tensor::from_slice::<i64>([4], &[3, 2, 0, 1]).unwrap()]).unwrap();
        assert_eq!(out.as_slice::<i64>().unwrap(), &[2, 3, 1, 0]);
        assert_eq!(run1(&n, &[vec32(&[])]).unwrap().dims(), &[0]);
        assert_eq!(run1(&n, &[vec32(&[2, 0, 0])]).unwrap_err().message, "0 is duplicated in the input.");
        assert_eq!(run1(&n, &[vec32(&[2, 0, 3])]).unwrap_err().message, "3 is not between 0 and 3");
        assert_eq!(run1(&n, &[vec32(&[2, -1, 0])]).unwrap_err().message, "-1 is not between 0 and 3");
        assert_eq!(run1(&n, &[i32s(&[1, 1], &[0])]).unwrap_err().message, "invert_permutation expects a 1D vector.");
    }

    fn stitch(op: &str, t: DType, count: i64) -> NodeSpec {
        node(op).attr("T", ty(t)).attr("N", AttrValue::Int(count))
    }

    // Expected values: TensorFlow 2.21's DynamicStitch.
    #[test]
    fn dynamic_stitch_matches_tf() {
        let data0 = Tensor::from_slice::<f32>([2, 2], &[1., 2., 3., 4.]).unwrap();
        let data1 = Tensor::from_slice::<f32>([2, 1, 2], &[5., 6., 7., 8.]).unwrap();
        let inputs = [vec32(&[0, 2]), i32s(&[2, 1], &[1, 3]), data0, data1];
        for op in ["DynamicStitch", "ParallelDynamicStitch"] {
            let out = run1(&stitch(op, DType::F32, 2), &inputs).unwrap();
            assert_eq!(out.dims(), &[4, 2]);
            assert_eq!(out.as_slice::<f32>().unwrap(), &[1., 2., 5., 6., 3., 4., 7., 8.]);
        }
        let f = |v: &[f32]| Tensor::from_slice::<f32>([v.len()], v).unwrap();
        // Later inputs win; gaps are zero.
        let out = run1(
            &stitch("DynamicStitch", DType::F32, 2),
            &[vec32(&[0, 1]), vec32(&[1, 2]), f(&[1., 2.]), f(&[3., 4.])],
        )
        .unwrap();
        assert_eq!(out.as_slice::<f32>().unwrap(), &[1., 3., 4.]);
        let out = run1(&stitch("DynamicStitch", DType::F32, 1), &[vec32(&[1, 1]), f(&[1., 2.])]).unwrap();
        assert_eq!(out.as_slice::<f32>().unwrap(), &[0., 2.]);
        let out = run1(&stitch("DynamicStitch", DType::F32, 1), &[vec32(&[0, 3]), f(&[1., 2.])]).unwrap();
        assert_eq!(out.as_slice::<f32>().unwrap(), &[1., 0., 0., 2.]);
        // Scalar indices, integer data.
        let ints = stitch("DynamicStitch", DType::I64, 2);
        let scalars = [Tensor::scalar(1i32), Tensor::scalar(0i32), Tensor::scalar(5i64), Tensor::scalar(6i64)];
        assert_eq!(run1(&ints, &scalars).unwrap().as_slice::<i64>().unwrap(), &[6, 5]);
        let empty =
            run1(&stitch("DynamicStitch", DType::F32, 1), &[vec32(&[]), Tensor::zeros(DType::F32, [0, 3]).unwrap()])
                .unwrap();
        assert_eq!(empty.dims(), &[0, 3]);
        // Errors, with TF's wording.
        let err = run1(
            &stitch("DynamicStitch", DType::F32, 2),
            &[
                vec32(&[0, 1, 2]),
                i32s(&[2, 2], &[3, 4, 5, -5]),
                f(&[1., 2., 3.]),
                Tensor::zeros(DType::F32, [2, 2]).unwrap(),
            ],
        )
        .unwrap_err();
        assert_eq!(err.message, "indices[3] is out of range");
        let err = run1(&stitch("DynamicStitch", DType::F32, 1), &[vec32(&[0, 1]), f(&[1., 2., 3.])]).unwrap_err();
        assert_eq!(err.message, "data[0].shape = [3] does not start with indices[0].shape = [2]");
        let err = run1(
            &stitch("DynamicStitch", DType::F32, 2),
            &[
                vec32(&[0, 1]),
                vec32(&[2]),
                Tensor::zeros(DType::F32, [2, 2]).unwrap(),
                Tensor::zeros(DType::F32, [1, 3]).unwrap(),
            ],
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "Need data[0].shape[1:] = data[1].shape[1:], got data[0].shape = [2,2], data[1].shape = [1,3], indices[0].shape = [2], indices[1].shape = [1]"
        );
    }

    #[test]
    fn prevent_gradient_and_snapshot_forward_their_input() {
        let x = Tensor::from_slice::<f32>([3], &[1., 2., 3.]).unwrap();
        for op in ["PreventGradient", "Snapshot"] {
            let out = run1(&node(op).attr("T", ty(DType::F32)), std::slice::from_ref(&x)).unwrap();
            assert!(out.shares_bytes_with(&x));
        }
    }
}
