//! Split (into equal parts), SplitV (into given sizes, one of which may be
//! -1 and is inferred) and Unpack (into slices along an axis, which is
//! dropped): the ops with one output per piece.
//!
//! Owns: these kernels and their signatures. Must not hold state beyond
//! parsed attributes.
//!
//! A piece of a split along the first non-trivial dimension is a
//! contiguous window of the input: when it starts on a tensor alignment
//! boundary it is handed out without a copy (the piece keeps the input's
//! bytes alive), as TensorFlow shares aligned buffers. Other pieces copy
//! one contiguous run per outer row.

use super::super::registry::OpDef;
use super::super::{
    KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_count, attr_index_type_or, index_values,
};
use super::{copy_columns, shape_without, window};
use crate::bail;
use crate::dispatch_dtype;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Element, Shape, Tensor};
use smallvec::SmallVec;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Split", split_signature, build_split),
    OpDef::kernel("SplitV", split_v_signature, build_split_v),
    OpDef::kernel("Unpack", unpack_signature, build_unpack),
];

/// `[int32 (split_dim), T] -> num_split x T`.
fn split_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let n = attr_count(node, "num_split", 1)?;
    Ok(OpSignature::new(vec![ValueType::Tensor(DType::I32), t], vec![t; n]))
}

/// `[T, Tlen (size_splits), int32 (split_dim)] -> num_split x T`; Tlen is
/// int64 by default.
fn split_v_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let n = attr_count(node, "num_split", 1)?;
    let tlen = ValueType::Tensor(attr_index_type_or(node, "Tlen", DType::I64)?);
    Ok(OpSignature::new(vec![t, tlen, ValueType::Tensor(DType::I32)], vec![t; n]))
}

/// `[T] -> num x T`.
fn unpack_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let n = attr_count(node, "num", 0)?;
    Ok(OpSignature::new(vec![t], vec![t; n]))
}

// ---------------------------------------------------------------------------
// Pieces

/// The piece of `input` at `start .. start + size` along `axis`, as a
/// tensor of `shape`.
fn piece<T: Element>(input: &Tensor, axis: usize, start: usize, size: usize, shape: Shape) -> Result<Tensor> {
    let dims = input.dims();
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..].iter().product();
    if outer == 1 {
        if let Some(t) = window(input, start * inner, size * inner, &shape) {
            return Ok(t);
        }
    }
    copy_columns::<T>(input.as_slice::<T>()?, dims[axis] * inner, start * inner, size * inner, shape)
}

type PieceFn = fn(&Tensor, usize, usize, usize, Shape) -> Result<Tensor>;

fn piece_fn(dtype: DType) -> Result<PieceFn> {
    Ok(dispatch_dtype!(dtype, T => piece::<T> as PieceFn))
}

/// `split_dim` normalised into `[0, rank)`, with Split's message.
fn split_axis(split_dim: i32, rank: usize) -> Result<usize> {
    let r = rank as i64;
    let axis = if split_dim < 0 { split_dim as i64 + r } else { split_dim as i64 };
    if !(0..r).contains(&axis) {
        bail!(invalid_argument, "-input rank(-{rank}) <= split_dim < input rank ({rank}), but got {split_dim}");
    }
    Ok(axis as usize)
}

/// Sets one output per size in `sizes`, consecutive pieces along `axis`.
fn set_pieces(ctx: &mut OpContext<'_>, piece: PieceFn, input: &Tensor, axis: usize, sizes: &[usize]) -> Result<()> {
    let mut start = 0;
    let mut dims: SmallVec<[usize; 8]> = SmallVec::from_slice(input.dims());
    for (j, &size) in sizes.iter().enumerate() {
        dims[axis] = size;
        let out = piece(input, axis, start, size, Shape::new(&dims))?;
        ctx.set_output(j, out);
        start += size;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Split

struct SplitKernel {
    num_split: usize,
    piece: PieceFn,
}

fn build_split(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[1]);
        return crate::ops::array::string_moves::build(init, "T", carriers, build_split);
    }
    Ok(Box::new(SplitKernel {
        num_split: attr_count(init.node, "num_split", 1)?,
        piece: piece_fn(init.node.attr_dtype("T")?)?,
    }))
}

impl OpKernel for SplitKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let split_dim = ctx.input(0)?;
        if split_dim.rank() != 0 {
            bail!(invalid_argument, "split_dim must be a scalar but has rank {}", split_dim.rank());
        }
        let split_dim = split_dim.scalar_value::<i32>()?;
        let input = ctx.input(1)?.clone();
        let axis = split_axis(split_dim, input.rank())?;
        let dim = input.dims()[axis];
        let n = self.num_split;
        if dim % n != 0 {
            bail!(
                invalid_argument,
                "Number of ways to split should evenly divide the split dimension, but got split_dim {axis} (size = {dim}) and num_split {n}"
            );
        }
        if n == 1 {
            ctx.set_output(0, input);
            return Ok(());
        }
        let sizes: SmallVec<[usize; 8]> = SmallVec::from_elem(dim / n, n);
        set_pieces(ctx, self.piece, &input, axis, &sizes)
    }
}

// ---------------------------------------------------------------------------
// SplitV

struct SplitVKernel {
    num_split: usize,
    piece: PieceFn,
}

fn build_split_v(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[0]);
        return crate::ops::array::string_moves::build(init, "T", carriers, build_split_v);
    }
    Ok(Box::new(SplitVKernel {
        num_split: attr_count(init.node, "num_split", 1)?,
        piece: piece_fn(init.node.attr_dtype("T")?)?,
    }))
}

impl OpKernel for SplitVKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?.clone();
        let size_splits = ctx.input(1)?;
        let split_dim = ctx.input(2)?;
        if split_dim.num_elements() != 1 {
            bail!(invalid_argument, "split_dim_tensor must have exactly one element.");
        }
        let split_dim = split_dim.as_slice::<i32>()?[0];
        let n = self.num_split;
        if size_splits.rank() != 1 || size_splits.num_elements() != n {
            bail!(
                invalid_argument,
                "size of the split_tensor must be 1-D and have the same elements as outputs got {} -D and {} elements",
                size_splits.rank(),
                size_splits.num_elements()
            );
        }
        let requested = index_values(size_splits, "size_splits")?;
        let axis = split_axis(split_dim, input.rank())?;
        let dim = input.dims()[axis] as i64;
        if n == 1 {
            if requested[0] != dim {
                bail!(
                    invalid_argument,
                    "If there is only one output, it must have the same size as the input. Input size: {dim} output size: {}",
                    requested[0]
                );
            }
            ctx.set_output(0, input);
            return Ok(());
        }
        let mut inferred = None;
        let mut determined = 0i64;
        for (d, &size) in requested.iter().enumerate() {
            if size == -1 {
                if inferred.is_some() {
                    bail!(invalid_argument, "There can only be one -1 in the input.");
                }
                inferred = Some(d);
            } else {
                determined = determined.saturating_add(size);
            }
        }
        let fits = match inferred {
            None => determined == dim,
            Some(_) => determined <= dim,
        };
        if !fits {
            bail!(
                invalid_argument,
                "Determined shape must either match input shape along split_dim exactly if fully specified, or be less than the size of the input along split_dim if not fully specified.  Got: {determined}"
            );
        }
        let mut sizes: SmallVec<[usize; 8]> = SmallVec::with_capacity(n);
        for (d, &size) in requested.iter().enumerate() {
            let size = if Some(d) == inferred { dim - determined } else { size };
            let Ok(size) = usize::try_from(size) else {
                bail!(invalid_argument, "Split size at index {d} must be >= 0. Got: {size}");
            };
            sizes.push(size);
        }
        // Negative sizes were refused above, so the sizes now sum to `dim`
        // (with no -1, `determined == dim`; with one, it takes the rest).
        set_pieces(ctx, self.piece, &input, axis, &sizes)
    }
}

// ---------------------------------------------------------------------------
// Unpack

struct UnpackKernel {
    num: usize,
    axis: i64,
    piece: PieceFn,
}

fn build_unpack(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[0]);
        return crate::ops::array::string_moves::build(init, "T", carriers, build_unpack);
    }
    Ok(Box::new(UnpackKernel {
        num: attr_count(init.node, "num", 0)?,
        axis: init.node.attr_int_or("axis", 0)?,
        piece: piece_fn(init.node.attr_dtype("T")?)?,
    }))
}

impl OpKernel for UnpackKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?.clone();
        let rank = input.rank() as i64;
        let axis = if self.axis < 0 { self.axis + rank } else { self.axis };
        if !(0..rank).contains(&axis) {
            bail!(invalid_argument, "axis = {} not in [{}, {rank})", self.axis, -rank);
        }
        let axis = axis as usize;
        if input.dims()[axis] != self.num {
            bail!(invalid_argument, "Input shape axis {axis} must equal {}, got shape {}", self.num, input.shape());
        }
        let shape = shape_without(input.dims(), axis);
        for j in 0..self.num {
            let out = (self.piece)(&input, axis, j, 1, shape.clone())?;
            ctx.set_output(j, out);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::resource::ResourceMgr;
    use crate::ops::testing::{node, ty};
    use crate::ops::{Value, run_kernel_once};

    fn run(n: &NodeSpec, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let values = inputs.iter().cloned().map(Value::Tensor).collect();
        let outs = run_kernel_once(n, values, &ResourceMgr::default())?;
        outs.into_iter().map(Value::into_tensor).collect()
    }
    fn iota(dims: &[usize]) -> Tensor {
        let n: usize = dims.iter().product();
        Tensor::from_slice::<f32>(dims, &(0..n).map(|i| i as f32).collect::<Vec<_>>()).unwrap()
    }
    fn values(t: &Tensor) -> Vec<f32> {
        t.as_slice::<f32>().unwrap().to_vec()
    }
    fn split(n: i64) -> NodeSpec {
        node("Split").attr("T", ty(DType::F32)).attr("num_split", AttrValue::Int(n))
    }
    fn split_v(n: i64, tlen: DType) -> NodeSpec {
        node("SplitV").attr("T", ty(DType::F32)).attr("num_split", AttrValue::Int(n)).attr("Tlen", ty(tlen))
    }

    #[test]
    fn split_equal_parts() {
        let x = iota(&[2, 6]);
        let outs = run(&split(3), &[Tensor::scalar(-1i32), x.clone()]).unwrap();
        assert_eq!(outs.len(), 3);
        assert_eq!(outs[0].dims(), &[2, 2]);
        assert_eq!(values(&outs[0]), [0., 1., 6., 7.]);
        assert_eq!(values(&outs[2]), [4., 5., 10., 11.]);
        let outs = run(&split(2), &[Tensor::scalar(0i32), x.clone()]).unwrap();
        assert_eq!(values(&outs[1]), [6., 7., 8., 9., 10., 11.]);
        let outs = run(&split(1), &[Tensor::scalar(1i32), x.clone()]).unwrap();
        assert!(outs[0].shares_bytes_with(&x));
        let err = run(&split(3), &[Tensor::scalar(0i32), iota(&[4, 3])]).unwrap_err();
        assert_eq!(
            err.message,
            "Number of ways to split should evenly divide the split dimension, but got split_dim 0 (size = 4) and num_split 3"
        );
        let err = run(&split(2), &[Tensor::scalar(2i32), iota(&[4, 3])]).unwrap_err();
        assert_eq!(err.message, "-input rank(-2) <= split_dim < input rank (2), but got 2");
        let err = run(&split(2), &[Tensor::from_slice::<i32>([1], &[0]).unwrap(), x]).unwrap_err();
        assert_eq!(err.message, "split_dim must be a scalar but has rank 1");
    }

    #[test]
    fn aligned_leading_pieces_share_the_input() {
        // 4 rows of 32 floats: each row is 128 bytes, so every piece starts
        // on a 64-byte boundary.
        let x = iota(&[4, 32]);
        let outs = run(&split(2), &[Tensor::scalar(0i32), x.clone()]).unwrap();
        assert!(outs[1].is_borrowed());
        assert_eq!(outs[1].data_ptr(), x.data_ptr().wrapping_add(2 * 32 * 4));
        assert_eq!(values(&outs[1])[0], 64.);
        drop(x);
        assert_eq!(values(&outs[1])[63], 127., "the piece keeps the bytes alive");
        // Rows of 3 floats are not aligned: copied.
        let y = iota(&[40, 3]);
        let outs = run(&split(2), &[Tensor::scalar(0i32), y]).unwrap();
        assert!(!outs[1].is_borrowed());
        assert_eq!(values(&outs[1])[0], 60.);
    }

    #[test]
    fn split_v_sizes_and_inference() {
        let x = iota(&[4, 3]);
        let sizes = Tensor::from_slice::<i64>([3], &[1, -1, 0]).unwrap();
        let outs = run(&split_v(3, DType::I64), &[x.clone(), sizes, Tensor::scalar(0i32)]).unwrap();
        assert_eq!(outs[0].dims(), &[1, 3]);
        assert_eq!(outs[1].dims(), &[3, 3]);
        assert_eq!(outs[2].dims(), &[0, 3]);
        assert_eq!(values(&outs[1]), (3..12).map(|i| i as f32).collect::<Vec<_>>());
        let sizes = Tensor::from_slice::<i32>([2], &[2, 1]).unwrap();
        let outs = run(&split_v(2, DType::I32), &[x.clone(), sizes, Tensor::scalar(-1i32)]).unwrap();
        assert_eq!(values(&outs[0]), [0., 1., 3., 4., 6., 7., 9., 10.]);
        assert_eq!(values(&outs[1]), [2., 5., 8., 11.]);
        let go = |n: i64, s: &[i64]| {
            run(
                &split_v(n, DType::I64),
                &[x.clone(), Tensor::from_slice::<i64>([s.len()], s).unwrap(), Tensor::scalar(0i32)],
            )
        };
        assert_eq!(
            go(1, &[-1]).unwrap_err().message,
            "If there is only one output, it must have the same size as the input. Input size: 4 output size: -1"
        );
        assert!(go(1, &[4]).unwrap()[0].shares_bytes_with(&x));
        assert_eq!(go(2, &[-1, -1]).unwrap_err().message, "There can only be one -1 in the input.");
        let mismatch = "Determined shape must either match input shape along split_dim exactly if fully specified, or be less than the size of the input along split_dim if not fully specified.  Got: ";
        assert_eq!(go(2, &[1, 2]).unwrap_err().message, format!("{mismatch}3"));
        assert_eq!(go(2, &[5, -1]).unwrap_err().message, format!("{mismatch}5"));
        assert_eq!(go(2, &[-2, 6]).unwrap_err().message, "Split size at index 0 must be >= 0. Got: -2");
        assert_eq!(
            go(3, &[1, 3]).unwrap_err().message,
            "size of the split_tensor must be 1-D and have the same elements as outputs got 1 -D and 2 elements"
        );
    }

    #[test]
    fn unpack_any_axis() {
        let x = iota(&[2, 3]);
        let unpack = |num: i64, axis: i64| {
            node("Unpack").attr("T", ty(DType::F32)).attr("num", AttrValue::Int(num)).attr("axis", AttrValue::Int(axis))
        };
        let outs = run(&unpack(3, -1), std::slice::from_ref(&x)).unwrap();
        assert_eq!(outs.len(), 3);
        assert_eq!(outs[1].dims(), &[2]);
        assert_eq!(values(&outs[1]), [1., 4.]);
        let outs = run(&unpack(2, 0), std::slice::from_ref(&x)).unwrap();
        assert_eq!(values(&outs[1]), [3., 4., 5.]);
        let b = Tensor::from_slice::<bool>([2], &[true, false]).unwrap();
        let nb = node("Unpack").attr("T", ty(DType::Bool)).attr("num", AttrValue::Int(2));
        let outs = run(&nb, &[b]).unwrap();
        assert!(outs[0].shape().is_scalar());
        assert_eq!(outs[1].as_slice::<bool>().unwrap(), &[false]);
        let outs = run(&unpack(0, 0), &[Tensor::zeros(DType::F32, [0, 2]).unwrap()]).unwrap();
        assert!(outs.is_empty());
        let err = run(&unpack(2, 1), std::slice::from_ref(&x)).unwrap_err();
        assert_eq!(err.message, "Input shape axis 1 must equal 2, got shape [2,3]");
        let err = run(&unpack(2, 2), std::slice::from_ref(&x)).unwrap_err();
        assert_eq!(err.message, "axis = 2 not in [-2, 2)");
        let err = run(&unpack(1, 0), &[Tensor::scalar(1.0f32)]).unwrap_err();
        assert_eq!(err.message, "axis = 0 not in [0, 0)");
    }
}
