//! `BroadcastTo` (what `tf.broadcast_to`, Keras' `Normalization` and
//! `tf.linspace` emit) and `BroadcastArgs` (the broadcast of two shapes).
//!
//! Owns: these kernels. BroadcastTo moves fixed-width elements as bytes, a
//! contiguous run at a time, so one path serves every dtype. Must not hold
//! state. Elementwise ops broadcast on their own (`broadcast`).

use super::super::broadcast::broadcast_shape;
use super::super::registry::OpDef;
use super::super::{
    FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or, index_values,
};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Shape, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("BroadcastTo", broadcast_to_signature, build_broadcast_to),
    OpDef::kernel("BroadcastArgs", broadcast_args_signature, build_broadcast_args),
];

fn broadcast_to_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let tidx = ValueType::Tensor(attr_index_type_or(node, "Tidx", DType::I32)?);
    Ok(OpSignature::new(vec![t, tidx], vec![t]))
}

fn build_broadcast_to(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[0]);
        return crate::ops::array::string_moves::build(init, "T", carriers, build_broadcast_to);
    }
    Ok(FnKernel::boxed(broadcast_to))
}

/// A shape given as a tensor of sizes, each checked to be non-negative.
pub(crate) fn shape_values(t: &Tensor, what: &str) -> Result<Vec<usize>> {
    if t.shape().rank() != 1 {
        bail!(invalid_argument, "{what} must be a vector, got shape {}", t.shape());
    }
    index_values(t, what)?
        .iter()
        .map(|&d| {
            usize::try_from(d)
                .map_err(|_| Status::invalid_argument(format!("{what} must not have negative sizes, got {d}")))
        })
        .collect()
}

fn broadcast_to(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    let target = shape_values(ctx.input(1)?, "shape")?;
    let dims = x.dims();
    let offset = target.len().checked_sub(dims.len());
    let fits = offset.is_some_and(|offset| dims.iter().zip(&target[offset..]).all(|(&d, &t)| d == t || d == 1));
    let Some(offset) = offset.filter(|_| fits) else {
        bail!(
            invalid_argument,
            "Unable to broadcast tensor of shape {} to tensor of shape {}",
            x.shape(),
            Shape::new(&target)
        );
    };
    if dims == target.as_slice() {
        let same = x.clone();
        ctx.set_output(0, same);
        return Ok(());
    }
    let size = super::element_size(x, "BroadcastTo")?;
    let padded: Vec<usize> = std::iter::repeat_n(1, offset).chain(dims.iter().copied()).collect();
    let bytes = expand(x.as_bytes(), &padded, &target, size);
    let out = Tensor::from_bytes(x.dtype(), Shape::new(&target), &bytes)?;
    ctx.set_output(0, out);
    Ok(())
}

/// `src` (row-major, `from` dims) repeated along the axes where `from` is
/// 1 and `to` is not. `from` and `to` have the same rank; every `from[i]`
/// is 1 or `to[i]`.
pub(crate) fn expand(src: &[u8], from: &[usize], to: &[usize], size: usize) -> Vec<u8> {
    debug_assert_eq!(from.len(), to.len());
    let total: usize = to.iter().product();
    let mut out = Vec::with_capacity(total * size);
    if total == 0 {
        return out;
    }
    // The trailing axes that are not broadcast form runs copied whole.
    let rank = to.len();
    let kept = from.iter().zip(to).rev().take_while(|(f, t)| f == t).count();
    let run = to[rank - kept..].iter().product::<usize>() * size;
    let outer = &to[..rank - kept];
    // Each outer axis's step in the source, in runs (0 where broadcast).
    let mut steps = vec![0usize; outer.len()];
    let mut step = 1;
    for axis in (0..outer.len()).rev() {
        steps[axis] = if from[axis] == 1 { 0 } else { step };
        step *= from[axis];
    }
    let mut index = vec![0usize; outer.len()];
    let mut source = 0usize;
    loop {
        out.extend_from_slice(&src[source * run..][..run]);
        // Odometer over the outer axes, keeping `source` in step.
        let mut axis = outer.len();
        loop {
            if axis == 0 {
                debug_assert_eq!(out.len(), total * size);
                return out;
            }
            axis -= 1;
            index[axis] += 1;
            source += steps[axis];
            if index[axis] < outer[axis] {
                break;
            }
            source -= steps[axis] * index[axis];
            index[axis] = 0;
        }
    }
}

fn broadcast_args_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(attr_index_type_or(node, "T", DType::I32)?);
    Ok(OpSignature::new(vec![t, t], vec![t]))
}

fn build_broadcast_args(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(broadcast_args))
}

fn broadcast_args(ctx: &mut OpContext<'_>) -> Result<()> {
    let s0 = ctx.input(0)?;
    let s1 = ctx.input(1)?;
    let a = shape_values(s0, "s0")?;
    let b = shape_values(s1, "s1")?;
    let shape = broadcast_shape(&a, &b)?;
    let n = shape.rank();
    let out = match s0.dtype() {
        DType::I64 => Tensor::from_map([n], shape.dims(), |d| d as i64)?,
        _ => {
            let dims: Vec<i32> = shape
                .dims()
                .iter()
                .map(|&d| i32::try_from(d).map_err(|_| Status::invalid_argument(format!("size {d} overflows int32"))))
                .collect::<Result<_>>()?;
            Tensor::from_slice::<i32>([n], &dims)?
        }
    };
    ctx.set_output(0, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{run1, ty};

    fn node(op: &str, t: DType) -> NodeSpec {
        crate::ops::testing::node(op).attr("T", ty(t))
    }

    #[test]
    fn broadcasts_leading_middle_and_trailing_axes() {
        let x = Tensor::from_slice::<f32>([2, 1], &[1.0, 2.0]).unwrap();
        let out =
            run1(&node("BroadcastTo", DType::F32), &[x, Tensor::from_slice::<i32>([3], &[2, 2, 3]).unwrap()]).unwrap();
        assert_eq!(out.dims(), &[2, 2, 3]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[1., 1., 1., 2., 2., 2., 1., 1., 1., 2., 2., 2.]);
        let row = Tensor::from_slice::<i64>([1, 3], &[7, 8, 9]).unwrap();
        let out =
            run1(&node("BroadcastTo", DType::I64), &[row, Tensor::from_slice::<i64>([2], &[2, 3]).unwrap()]).unwrap();
        assert_eq!(out.as_slice::<i64>().unwrap(), &[7, 8, 9, 7, 8, 9]);
        let flags = Tensor::from_slice::<bool>([2, 1, 1], &[true, false]).unwrap();
        let out =
            run1(&node("BroadcastTo", DType::Bool), &[flags, Tensor::from_slice::<i32>([3], &[2, 2, 2]).unwrap()])
                .unwrap();
        assert_eq!(out.as_slice::<bool>().unwrap(), &[true, true, true, true, false, false, false, false]);
    }

    #[test]
    fn a_shape_it_cannot_reach_is_an_error_naming_both() {
        let x = Tensor::from_slice::<f32>([3], &[1.0, 2.0, 3.0]).unwrap();
        for target in [&[2, 2][..], &[1][..]] {
            let shape = Tensor::from_slice::<i32>([target.len()], target).unwrap();
            let err = run1(&node("BroadcastTo", DType::F32), &[x.clone(), shape]).unwrap_err();
            assert!(err.message.contains("Unable to broadcast tensor of shape [3]"), "{err}");
        }
        let negative = Tensor::from_slice::<i32>([2], &[-1, 3]).unwrap();
        assert!(run1(&node("BroadcastTo", DType::F32), &[x, negative]).is_err());
    }

    #[test]
    fn broadcast_args_is_the_broadcast_shape() {
        let a = Tensor::from_slice::<i32>([3], &[2, 1, 3]).unwrap();
        let b = Tensor::from_slice::<i32>([2], &[4, 1]).unwrap();
        let out = run1(&node("BroadcastArgs", DType::I32), &[a.clone(), b]).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), &[2, 4, 3]);
        let bad = Tensor::from_slice::<i32>([1], &[2]).unwrap();
        assert!(run1(&node("BroadcastArgs", DType::I32), &[a, bad]).unwrap_err().message.contains("Incompatible"));
    }
}
