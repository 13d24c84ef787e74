//! Ops that move elements without computing on them: `ReverseV2`,
//! `SpaceToBatchND`/`BatchToSpaceND` (how Keras writes dilated
//! convolutions) and `MatrixDiag`/`MatrixDiagV2`/`MatrixDiagV3` with one
//! diagonal (what `tf.eye` emits).
//!
//! Owns: these kernels. They work on bytes, an element at a time or a
//! contiguous run at a time, so one path serves every dtype. Must not
//! hold state beyond parsed attributes.

use super::super::registry::OpDef;
use super::super::{FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, index_values};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Shape, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("ReverseV2", reverse_signature, build_reverse),
    OpDef::kernel("SpaceToBatchND", space_batch_signature, build_space_to_batch),
    OpDef::kernel("BatchToSpaceND", space_batch_signature, build_batch_to_space),
    OpDef::kernel("MatrixDiag", matrix_diag_signature::<1>, build_matrix_diag),
    OpDef::kernel("MatrixDiagV2", matrix_diag_signature::<5>, build_matrix_diag),
    OpDef::kernel("MatrixDiagV3", matrix_diag_signature::<5>, build_matrix_diag),
];

fn tensor_t(node: &NodeSpec) -> Result<ValueType> {
    Ok(ValueType::Tensor(node.attr_dtype("T")?))
}

fn reverse_signature(node: &NodeSpec) -> Result<OpSignature> {
    let tidx = node.attr_dtype_or("Tidx", DType::I32)?;
    Ok(OpSignature::new(vec![tensor_t(node)?, ValueType::Tensor(tidx)], vec![tensor_t(node)?]))
}

fn build_reverse(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[0]);
        return crate::ops::array::string_moves::build(init, "T", carriers, build_reverse);
    }
    Ok(FnKernel::boxed(reverse))
}

/// Element `i` of `shape` in row-major order, as a multi-index into `out`.
fn unravel(mut i: usize, dims: &[usize], out: &mut [usize]) {
    for (axis, &d) in dims.iter().enumerate().rev() {
        out[axis] = i % d;
        i /= d;
    }
}

fn reverse(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    let axes = index_values(ctx.input(1)?, "axis")?;
    let rank = x.shape().rank();
    let mut flip = vec![false; rank];
    for &a in &axes {
        let axis = if a < 0 { a + rank as i64 } else { a };
        if axis < 0 || axis >= rank as i64 {
            bail!(invalid_argument, "'axis'[{a}] = {a} is out of valid range [0, {rank}");
        }
        if std::mem::replace(&mut flip[axis as usize], true) {
            bail!(invalid_argument, "axis {axis} specified more than once.");
        }
    }
    let dims = x.dims().to_vec();
    let size = super::element_size(x, "ReverseV2")?;
    // The innermost axes left alone form runs copied whole.
    let kept_inner = flip.iter().rev().take_while(|f| !**f).count();
    let run: usize = dims[rank - kept_inner..].iter().product::<usize>() * size;
    let outer = &dims[..rank - kept_inner];
    let runs: usize = outer.iter().product();
    let src = x.as_bytes();
    let mut out = vec![0u8; src.len()];
    let strides = Shape::new(outer).strides();
    let mut index = vec![0usize; outer.len()];
    for r in 0..runs {
        unravel(r, outer, &mut index);
        let from: usize = index
            .iter()
            .zip(outer)
            .zip(&flip)
            .zip(strides.iter())
            .map(|(((&i, &d), &f), &s)| if f { (d - 1 - i) * s } else { i * s })
            .sum();
        out[r * run..][..run].copy_from_slice(&src[from * run..][..run]);
    }
    let t = Tensor::from_bytes(x.dtype(), x.shape().clone(), &out)?;
    ctx.set_output(0, t);
    Ok(())
}

fn space_batch_signature(node: &NodeSpec) -> Result<OpSignature> {
    let block = ValueType::Tensor(node.attr_dtype_or("Tblock_shape", DType::I32)?);
    let pads_key = if node.op == "BatchToSpaceND" { "Tcrops" } else { "Tpaddings" };
    let pads = ValueType::Tensor(node.attr_dtype_or(pads_key, DType::I32)?);
    Ok(OpSignature::new(vec![tensor_t(node)?, block, pads], vec![tensor_t(node)?]))
}

fn build_space_to_batch(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(|ctx| space_batch(ctx, true)))
}

fn build_batch_to_space(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(|ctx| space_batch(ctx, false)))
}

/// The block shape and the [M, 2] paddings (or crops), checked.
fn block_and_pads(ctx: &OpContext<'_>, rank: usize, what: &str) -> Result<(Vec<usize>, Vec<[usize; 2]>)> {
    let block_t = ctx.input(1)?;
    let pads_t = ctx.input(2)?;
    if block_t.shape().rank() != 1 {
        bail!(invalid_argument, "block_shape must be one-dimensional, got shape {:?}", block_t.dims());
    }
    let m = block_t.num_elements();
    if pads_t.dims() != [m, 2] {
        bail!(invalid_argument, "{what} should have shape [{m}, 2] instead of {:?}", pads_t.dims());
    }
    if m + 1 > rank {
        bail!(invalid_argument, "input rank should be >= {} instead of {rank}", m + 1);
    }
    let block: Vec<usize> = index_values(block_t, "block_shape")?
        .iter()
        .map(|&b| {
            usize::try_from(b).ok().filter(|&b| b >= 1).ok_or_else(|| {
                Status::invalid_argument(format!("All values in block_shape must be positive, got value, {b}"))
            })
        })
        .collect::<Result<_>>()?;
    let flat = index_values(pads_t, what)?;
    let pads: Vec<[usize; 2]> = flat
        .chunks(2)
        .map(|p| match (usize::try_from(p[0]), usize::try_from(p[1])) {
            (Ok(a), Ok(b)) => Ok([a, b]),
            _ => Err(Status::invalid_argument(format!("{what} must be non-negative, got [{}, {}]", p[0], p[1]))),
        })
        .collect::<Result<_>>()?;
    Ok((block, pads))
}

/// SpaceToBatchND (`forward`) and its inverse BatchToSpaceND: batch entry
/// `o * batch + b` (`o` the block offset, its first dim most significant)
/// holds the elements of batch `b` at padded positions `s * block + o`.
fn space_batch(ctx: &mut OpContext<'_>, forward: bool) -> Result<()> {
    let x = ctx.input(0)?;
    let dims = x.dims().to_vec();
    let what = if forward { "paddings" } else { "crops" };
    let (block, pads) = block_and_pads(ctx, dims.len(), what)?;
    let m = block.len();
    let block_count: usize = block.iter().product();
    let rest: usize = dims[1 + m..].iter().product();
    let size = super::element_size(x, "SpaceToBatchND/BatchToSpaceND")?;
    let run = rest * size;
    // Shapes of the "space" side (batch b, padded spatial) and the "batch" side.
    let (space_batch_n, batch_side_spatial, space_spatial): (usize, Vec<usize>, Vec<usize>) = if forward {
        let padded: Vec<usize> = (0..m).map(|i| dims[1 + i] + pads[i][0] + pads[i][1]).collect();
        for i in 0..m {
            if padded[i] % block[i] != 0 {
                bail!(
                    invalid_argument,
                    "padded_shape[{i}]={} is not divisible by block_shape[{i}]={}",
                    padded[i],
                    block[i]
                );
            }
        }
        (dims[0], (0..m).map(|i| padded[i] / block[i]).collect(), dims[1..1 + m].to_vec())
    } else {
        if dims[0] % block_count != 0 {
            bail!(
                invalid_argument,
                "Input batch dimension ({}) is not divisible by product of block sizes ({block_count})",
                dims[0]
            );
        }
        let full: Vec<usize> = (0..m).map(|i| dims[1 + i] * block[i]).collect();
        let mut out = Vec::with_capacity(m);
        for i in 0..m {
            let cropped = full[i].checked_sub(pads[i][0] + pads[i][1]).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "Negative output dimension size caused by overly large crop values: crops[{i}] = {:?}",
                    pads[i]
                ))
            })?;
            out.push(cropped);
        }
        (dims[0] / block_count, dims[1..1 + m].to_vec(), out)
    };
    let batch_side_dims: Vec<usize> = std::iter::once(space_batch_n * block_count)
        .chain(batch_side_spatial.iter().copied())
        .chain(dims[1 + m..].iter().copied())
        .collect();
    let space_side_dims: Vec<usize> = std::iter::once(space_batch_n)
        .chain(space_spatial.iter().copied())
        .chain(dims[1 + m..].iter().copied())
        .collect();
    let out_dims = if forward { batch_side_dims.clone() } else { space_side_dims.clone() };
    let src = x.as_bytes();
    let total_runs: usize = batch_side_dims[..1 + m].iter().product();
    let mut out = vec![0u8; out_dims.iter().product::<usize>() * size];
    let space_strides = Shape::new(&space_side_dims[..1 + m]).strides();
    let mut index = vec![0usize; 1 + m];
    let mut offsets = vec![0usize; m];
    'runs: for r in 0..total_runs {
        unravel(r, &batch_side_dims[..1 + m], &mut index);
        let (ob, b) = (index[0] / space_batch_n, index[0] % space_batch_n);
        unravel(ob, &block, &mut offsets);
        let mut at = b * space_strides[0];
        for i in 0..m {
            let padded = index[1 + i] * block[i] + offsets[i];
            // Space-side position: padded minus the leading pad (or crop).
            let Some(pos) = padded.checked_sub(pads[i][0]).filter(|&p| p < space_spatial[i]) else {
                continue 'runs; // padding: stays zero (forward) or is cropped away
            };
            at += pos * space_strides[1 + i];
        }
        let (from, to) = if forward { (at, r) } else { (r, at) };
        out[to * run..][..run].copy_from_slice(&src[from * run..][..run]);
    }
    let t = Tensor::from_bytes(x.dtype(), Shape::from_vec(out_dims), &out)?;
    ctx.set_output(0, t);
    Ok(())
}

/// `MatrixDiag` has the diagonal only; V2/V3 add k, num_rows, num_cols
/// and padding_value.
fn matrix_diag_signature<const INPUTS: usize>(node: &NodeSpec) -> Result<OpSignature> {
    let t = tensor_t(node)?;
    let i32t = ValueType::Tensor(DType::I32);
    let inputs = if INPUTS == 1 { vec![t] } else { vec![t, i32t, i32t, i32t, t] };
    Ok(OpSignature::new(inputs, vec![t]))
}

fn build_matrix_diag(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(matrix_diag))
}

fn matrix_diag(ctx: &mut OpContext<'_>) -> Result<()> {
    let diag = ctx.input(0)?;
    let dims = diag.dims().to_vec();
    let Some((&len, batch_dims)) = dims.split_last() else {
        bail!(invalid_argument, "diagonal must be at least 1-dim, got shape []");
    };
    let (k, rows, cols, pad) = if ctx.num_inputs() == 5 {
        let k = index_values(ctx.input(1)?, "k")?;
        let k = match k.as_slice() {
            [k] => *k,
            [lo, hi] if lo == hi => *lo,
            _ => {
                return Err(Status::unimplemented(format!(
                    "MatrixDiag with a band of diagonals (k = {k:?}) is not supported; one diagonal is"
                )));
            }
        };
        let scalar = |i: usize, what: &str| -> Result<i64> {
            let t = ctx.input(i)?;
            if t.num_elements() != 1 {
                bail!(invalid_argument, "{what} must be a scalar, got shape {:?}", t.dims());
            }
            Ok(index_values(t, what)?[0])
        };
        (k, scalar(2, "num_rows")?, scalar(3, "num_cols")?, Some(ctx.input(4)?.clone()))
    } else {
        (0, -1, -1, None)
    };
    let min_rows = len as i64 - k.min(0);
    let min_cols = len as i64 + k.max(0);
    // TensorFlow's defaults: both unknown, the smallest square that holds
    // the diagonal; one unknown, its smallest.
    let (rows, cols) = match (rows < 0, cols < 0) {
        (true, true) => (min_rows.max(min_cols), min_rows.max(min_cols)),
        (true, false) => (min_rows, cols),
        (false, true) => (rows, min_cols),
        (false, false) => (rows, cols),
    };
    if rows < min_rows || cols < min_cols || (rows != min_rows && cols != min_cols) {
        bail!(
            invalid_argument,
            "The number of diagonal elements should match the number of rows or columns: rows {rows}, cols {cols}, diagonal length {len}, k {k}"
        );
    }
    let (rows, cols) = (rows as usize, cols as usize);
    let size = super::element_size(diag, "MatrixDiag")?;
    let batch: usize = batch_dims.iter().product();
    let mut out = vec![0u8; batch * rows * cols * size];
    if let Some(pad) = &pad {
        if pad.num_elements() != 1 || pad.dtype() != diag.dtype() {
            bail!(invalid_argument, "padding_value must be a scalar of the diagonal's dtype");
        }
        for chunk in out.chunks_mut(size) {
            chunk.copy_from_slice(pad.as_bytes());
        }
    }
    let src = diag.as_bytes();
    for b in 0..batch {
        for i in 0..len {
            let (r, c) = if k >= 0 { (i, i + k as usize) } else { (i + (-k) as usize, i) };
            let to = ((b * rows + r) * cols + c) * size;
            out[to..to + size].copy_from_slice(&src[(b * len + i) * size..][..size]);
        }
    }
    let out_dims: Vec<usize> = batch_dims.iter().copied().chain([rows, cols]).collect();
    let t = Tensor::from_bytes(diag.dtype(), Shape::from_vec(out_dims), &out)?;
    ctx.set_output(0, t);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{node, run1, ty};

    fn f32s(dims: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(dims, v).unwrap()
    }

    fn i32s(v: &[i32]) -> Tensor {
        Tensor::from_slice::<i32>([v.len()], v).unwrap()
    }

    #[test]
    fn reverse_any_axes() {
        let x = f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let n = node("ReverseV2").attr("T", ty(DType::F32));
        let r = run1(&n, &[x.clone(), i32s(&[1])]).unwrap();
        assert_eq!(r.as_slice::<f32>().unwrap(), &[3., 2., 1., 6., 5., 4.]);
        let r = run1(&n, &[x.clone(), i32s(&[0])]).unwrap();
        assert_eq!(r.as_slice::<f32>().unwrap(), &[4., 5., 6., 1., 2., 3.]);
        let r = run1(&n, &[x.clone(), i32s(&[-1, 0])]).unwrap();
        assert_eq!(r.as_slice::<f32>().unwrap(), &[6., 5., 4., 3., 2., 1.]);
        assert!(run1(&n, &[x.clone(), i32s(&[2])]).unwrap_err().message.contains("out of valid range"));
        assert!(run1(&n, &[x, i32s(&[1, -1])]).unwrap_err().message.contains("more than once"));
    }

    #[test]
    fn space_to_batch_and_back() {
        // TF: x = arange(1, 17).reshape(1, 4, 4, 1), block [2, 2], no pads.
        let x = f32s(&[1, 4, 4, 1], &(1..=16).map(|v| v as f32).collect::<Vec<_>>());
        let block = i32s(&[2, 2]);
        let zero = Tensor::from_slice::<i32>([2, 2], &[0, 0, 0, 0]).unwrap();
        let s2b = node("SpaceToBatchND").attr("T", ty(DType::F32));
        let y = run1(&s2b, &[x.clone(), block.clone(), zero.clone()]).unwrap();
        assert_eq!(y.dims(), &[4, 2, 2, 1]);
        assert_eq!(
            y.as_slice::<f32>().unwrap(),
            &[1., 3., 9., 11., 2., 4., 10., 12., 5., 7., 13., 15., 6., 8., 14., 16.]
        );
        let b2s = node("BatchToSpaceND").attr("T", ty(DType::F32));
        let back = run1(&b2s, &[y, block.clone(), zero]).unwrap();
        assert_eq!(back.as_slice::<f32>().unwrap(), x.as_slice::<f32>().unwrap());
        // Padding [1, 1] on the first spatial axis: zeros appear, crops remove them.
        let pads = Tensor::from_slice::<i32>([2, 2], &[1, 1, 0, 0]).unwrap();
        let y = run1(&s2b, &[x.clone(), block.clone(), pads.clone()]).unwrap();
        assert_eq!(y.dims(), &[4, 3, 2, 1]);
        assert_eq!(&y.as_slice::<f32>().unwrap()[..6], &[0., 0., 5., 7., 13., 15.]);
        let back = run1(&b2s, &[y, block, pads]).unwrap();
        assert_eq!(back.as_slice::<f32>().unwrap(), x.as_slice::<f32>().unwrap());
    }

    #[test]
    fn matrix_diag_makes_an_eye_and_off_diagonals() {
        let ones = f32s(&[3], &[1., 1., 1.]);
        let n = node("MatrixDiagV3").attr("T", ty(DType::F32));
        let s = |v: i32| Tensor::scalar(v);
        let eye = run1(&n, &[ones.clone(), s(0), s(-1), s(-1), Tensor::scalar(0.0f32)]).unwrap();
        assert_eq!(eye.dims(), &[3, 3]);
        assert_eq!(eye.as_slice::<f32>().unwrap(), &[1., 0., 0., 0., 1., 0., 0., 0., 1.]);
        // TensorFlow 2.21: with neither size given the matrix is the
        // smallest square; with one given, the other is its smallest.
        let upper = run1(&n, &[f32s(&[2], &[7., 8.]), s(1), s(-1), s(-1), Tensor::scalar(-1.0f32)]).unwrap();
        assert_eq!(upper.dims(), &[3, 3]);
        assert_eq!(upper.as_slice::<f32>().unwrap(), &[-1., 7., -1., -1., -1., 8., -1., -1., -1.]);
        let lower = run1(&n, &[f32s(&[2], &[7., 8.]), s(-1), s(-1), s(3), Tensor::scalar(0.0f32)]).unwrap();
        assert_eq!(lower.dims(), &[3, 3]);
        assert_eq!(lower.as_slice::<f32>().unwrap(), &[0., 0., 0., 7., 0., 0., 0., 8., 0.]);
        let wide = run1(&n, &[f32s(&[2], &[7., 8.]), s(1), s(2), s(-1), Tensor::scalar(0.0f32)]).unwrap();
        assert_eq!(wide.dims(), &[2, 3]);
        assert_eq!(wide.as_slice::<f32>().unwrap(), &[0., 7., 0., 0., 0., 8.]);
        let v1 = run1(&node("MatrixDiag").attr("T", ty(DType::F32)), &[f32s(&[2, 2], &[1., 2., 3., 4.])]).unwrap();
        assert_eq!(v1.dims(), &[2, 2, 2]);
        assert_eq!(v1.as_slice::<f32>().unwrap(), &[1., 0., 0., 2., 3., 0., 0., 4.]);
    }
}
