//! Where with one input (`tf.where(condition)`): the coordinates of the true
//! (for numbers: non-zero) elements, as an int64 `[count, rank]` matrix in
//! row-major order. The three-input form is SelectV2, in `math`.
//!
//! Owns: this kernel and its signature. Must not hold state.
//!
//! As TensorFlow's CPU kernel: inputs of rank 1 to 8 only (a scalar is an
//! error); NaN counts as non-zero, -0.0 as zero.

use super::super::registry::OpDef;
use super::super::{FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::bail;
use crate::dispatch_dtype;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Element, Tensor};
use smallvec::SmallVec;

pub const DEFS: &[OpDef] = &[OpDef::kernel("Where", where_signature, build_where)];

/// The highest input rank TensorFlow's kernel handles.
const MAX_RANK: usize = 8;

/// `[T] -> [int64]`; T is bool by default.
fn where_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype_or("T", DType::Bool)?);
    Ok(OpSignature::new(vec![t], vec![ValueType::Tensor(DType::I64)]))
}

fn build_where(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype_or("T", DType::Bool)?;
    Ok(FnKernel::boxed(dispatch_dtype!(dtype, T => compute_where::<T>)))
}

fn compute_where<T: Element>(ctx: &mut OpContext<'_>) -> Result<()> {
    let input = ctx.input(0)?;
    let rank = input.rank();
    if rank == 0 || rank > MAX_RANK {
        bail!(invalid_argument, "WhereOp : Unhandled input dimensions: {rank}");
    }
    let x = input.as_slice::<T>()?;
    // Zero is each type's default; `!=` makes NaN non-zero and -0.0 zero.
    let zero = T::default();
    let count = x.iter().filter(|&&v| v != zero).count();
    let dims = input.dims();
    let out = Tensor::build::<i64>([count, rank], |out| {
        let mut coords: SmallVec<[i64; MAX_RANK]> = SmallVec::from_elem(0, rank);
        let mut rows = out.chunks_exact_mut(rank);
        for &v in x {
            if v != zero {
                if let Some(row) = rows.next() {
                    row.copy_from_slice(&coords);
                }
            }
            // Advance the coordinates of the next element.
            let mut d = rank;
            while d > 0 {
                d -= 1;
                coords[d] += 1;
                if (coords[d] as usize) < dims[d] {
                    break;
                }
                coords[d] = 0;
            }
        }
    })?;
    ctx.set_output(0, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{node, run1, ty};

    #[test]
    fn coordinates_of_true_elements() {
        let b = Tensor::from_slice::<bool>([2, 2], &[true, false, false, true]).unwrap();
        let out = run1(&node("Where"), &[b]).unwrap();
        assert_eq!(out.dtype(), DType::I64);
        assert_eq!(out.dims(), &[2, 2]);
        assert_eq!(out.as_slice::<i64>().unwrap(), &[0, 0, 1, 1]);
        // tf.where([0., 1., nan, -0.]) == [[1], [2]]
        let f = Tensor::from_slice::<f32>([4], &[0.0, 1.0, f32::NAN, -0.0]).unwrap();
        let out = run1(&node("Where").attr("T", ty(DType::F32)), &[f]).unwrap();
        assert_eq!(out.dims(), &[2, 1]);
        assert_eq!(out.as_slice::<i64>().unwrap(), &[1, 2]);
        let i = Tensor::from_slice::<i64>([2, 1, 3], &[0, 5, 0, 0, 0, -1]).unwrap();
        let out = run1(&node("Where").attr("T", ty(DType::I64)), &[i]).unwrap();
        assert_eq!(out.as_slice::<i64>().unwrap(), &[0, 0, 1, 1, 0, 2]);
    }

    #[test]
    fn empty_and_rank_limits() {
        let none = Tensor::zeros(DType::I32, [3, 2]).unwrap();
        let out = run1(&node("Where").attr("T", ty(DType::I32)), &[none]).unwrap();
        assert_eq!(out.dims(), &[0, 2]);
        let empty = Tensor::zeros(DType::Bool, [0, 4]).unwrap();
        assert_eq!(run1(&node("Where"), &[empty]).unwrap().dims(), &[0, 2]);
        let ones = Tensor::from_slice::<bool>([1; 8], &[true]).unwrap();
        assert_eq!(run1(&node("Where"), &[ones]).unwrap().dims(), &[1, 8]);
        let err = run1(&node("Where"), &[Tensor::scalar(true)]).unwrap_err();
        assert_eq!(err.message, "WhereOp : Unhandled input dimensions: 0");
        let err = run1(&node("Where"), &[Tensor::zeros(DType::Bool, [1; 9]).unwrap()]).unwrap_err();
        assert_eq!(err.message, "WhereOp : Unhandled input dimensions: 9");
    }
}
