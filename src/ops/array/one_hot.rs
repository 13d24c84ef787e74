//! OneHot: `indices` of any rank, expanded along a new dimension of size
//! `depth` (at `axis`, last by default) into `on_value` where the
//! dimension's position equals the index and `off_value` elsewhere.
//!
//! Owns: this kernel and its signature. Must not hold state beyond the
//! parsed axis.
//!
//! As TensorFlow: an index outside `[0, depth)` (negative included) is not
//! an error; its row is all `off_value`.

use super::super::registry::OpDef;
use super::super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or};
use super::IndexElem;
use crate::bail;
use crate::dispatch_dtype;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Element, Shape, Tensor};

pub const DEFS: &[OpDef] = &[OpDef::kernel("OneHot", one_hot_signature, build_one_hot)];

/// `[TI, int32, T, T] -> [T]`; TI is int64 by default.
fn one_hot_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let ti = ValueType::Tensor(attr_index_type_or(node, "TI", DType::I64)?);
    Ok(OpSignature::new(vec![ti, ValueType::Tensor(DType::I32), t, t], vec![t]))
}

type OneHotFn = fn(&Tensor, usize, &Tensor, &Tensor, i64) -> Result<Tensor>;

struct OneHotKernel {
    axis: i64,
    one_hot: OneHotFn,
}

fn build_one_hot(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let index = attr_index_type_or(init.node, "TI", DType::I64)?;
    let one_hot = if index == DType::I32 {
        dispatch_dtype!(dtype, T => one_hot::<T, i32> as OneHotFn)
    } else {
        dispatch_dtype!(dtype, T => one_hot::<T, i64> as OneHotFn)
    };
    Ok(Box::new(OneHotKernel { axis: init.node.attr_int_or("axis", -1)?, one_hot }))
}

impl OpKernel for OneHotKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let indices = ctx.input(0)?;
        let depth = ctx.input(1)?;
        let (on, off) = (ctx.input(2)?, ctx.input(3)?);
        let output_rank = indices.rank() as i64 + 1;
        if !(self.axis == -1 || (0..output_rank).contains(&self.axis)) {
            bail!(
                invalid_argument,
                "Expected axis to be -1 or between [0, {output_rank}).  But received: {}",
                self.axis
            );
        }
        for (t, what) in [(depth, "depth"), (on, "on_value"), (off, "off_value")] {
            if t.rank() != 0 {
                bail!(invalid_argument, "{what} must be a scalar, but got: {}", t.shape());
            }
        }
        let depth = depth.scalar_value::<i32>()?;
        let Ok(depth) = usize::try_from(depth) else {
            bail!(invalid_argument, "depth must be non-negative, got: {depth}");
        };
        let out = (self.one_hot)(indices, depth, on, off, self.axis)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

/// The output as `[prefix, depth, suffix]`: `prefix` is the product of the
/// index dimensions before `axis`, `suffix` of those after it.
fn one_hot<T: Element, I: IndexElem>(
    indices: &Tensor,
    depth: usize,
    on: &Tensor,
    off: &Tensor,
    axis: i64,
) -> Result<Tensor> {
    let dims = indices.dims();
    let axis = if axis == -1 { dims.len() } else { axis as usize };
    let mut shape = Shape::new(&dims[..axis]);
    shape.push(depth);
    for &d in &dims[axis..] {
        shape.push(d);
    }
    if shape.checked_num_elements().is_none() {
        bail!(
            invalid_argument,
            "OneHot result would have shape {} + [{depth}], which exceeds 2**63 - 1 elements",
            indices.shape()
        );
    }
    let (on, off) = (on.scalar_value::<T>()?, off.scalar_value::<T>()?);
    let idx = indices.as_slice::<I>()?;
    let suffix: usize = dims[axis..].iter().product();
    let limit = depth as i64;
    Tensor::build::<T>(shape, |out| {
        if out.is_empty() {
            return;
        }
        out.fill(off);
        // Non-empty: depth and suffix are both positive.
        for (plane, row) in out.chunks_exact_mut(depth * suffix).zip(idx.chunks_exact(suffix)) {
            for (s, &i) in row.iter().enumerate() {
                let i = i.as_i64();
                if (0..limit).contains(&i) {
                    plane[i as usize * suffix + s] = on;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};

    fn one_hot_node(t: DType, ti: DType, axis: i64) -> NodeSpec {
        node("OneHot").attr("T", ty(t)).attr("TI", ty(ti)).attr("axis", AttrValue::Int(axis))
    }

    #[test]
    fn last_axis_with_out_of_range_indices() {
        // tf.one_hot([0, 2, -1, 5], 3)
        let i = Tensor::from_slice::<i32>([4], &[0, 2, -1, 5]).unwrap();
        let n = one_hot_node(DType::F32, DType::I32, -1);
        let out = run1(&n, &[i, Tensor::scalar(3i32), Tensor::scalar(1.0f32), Tensor::scalar(0.0f32)]).unwrap();
        assert_eq!(out.dims(), &[4, 3]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[1., 0., 0., 0., 0., 1., 0., 0., 0., 0., 0., 0.]);
    }

    #[test]
    fn given_axis_and_integer_values() {
        // tf.one_hot([[0, 2], [1, -1]], 3, axis=0, on_value=5, off_value=-1)
        let i = Tensor::from_slice::<i64>([2, 2], &[0, 2, 1, -1]).unwrap();
        let n = one_hot_node(DType::I32, DType::I64, 0);
        let out = run1(&n, &[i.clone(), Tensor::scalar(3i32), Tensor::scalar(5i32), Tensor::scalar(-1i32)]).unwrap();
        assert_eq!(out.dims(), &[3, 2, 2]);
        assert_eq!(out.as_slice::<i32>().unwrap(), &[5, -1, -1, -1, -1, -1, 5, -1, -1, 5, -1, -1]);
        // axis=1: [2, 3, 2]
        let n = one_hot_node(DType::Bool, DType::I64, 1);
        let out = run1(&n, &[i, Tensor::scalar(3i32), Tensor::scalar(true), Tensor::scalar(false)]).unwrap();
        assert_eq!(out.dims(), &[2, 3, 2]);
        assert_eq!(
            out.as_slice::<bool>().unwrap(),
            &[true, false, false, false, false, true, false, false, true, false, false, false]
        );
        // A scalar index, float64.
        let n = one_hot_node(DType::F64, DType::I32, -1);
        let out =
            run1(&n, &[Tensor::scalar(1i32), Tensor::scalar(2i32), Tensor::scalar(2.5f64), Tensor::scalar(0.5f64)])
                .unwrap();
        assert_eq!(out.as_slice::<f64>().unwrap(), &[0.5, 2.5]);
        // int64 values, TI defaults to int64.
        let n = node("OneHot").attr("T", ty(DType::I64));
        let i = Tensor::from_slice::<i64>([2], &[1, 0]).unwrap();
        let out = run1(&n, &[i, Tensor::scalar(2i32), Tensor::scalar(7i64), Tensor::scalar(0i64)]).unwrap();
        assert_eq!(out.as_slice::<i64>().unwrap(), &[0, 7, 7, 0]);
    }

    #[test]
    fn empty_and_errors() {
        let n = one_hot_node(DType::F32, DType::I32, -1);
        let on_off = [Tensor::scalar(1.0f32), Tensor::scalar(0.0f32)];
        let run = |i: Tensor, depth: Tensor, n: &NodeSpec| run1(n, &[i, depth, on_off[0].clone(), on_off[1].clone()]);
        let e = Tensor::zeros(DType::I32, [0, 2]).unwrap();
        assert_eq!(run(e, Tensor::scalar(3i32), &n).unwrap().dims(), &[0, 2, 3]);
        let i = Tensor::from_slice::<i32>([1], &[0]).unwrap();
        assert_eq!(run(i.clone(), Tensor::scalar(0i32), &n).unwrap().dims(), &[1, 0]);
        let err = run(i.clone(), Tensor::scalar(-1i32), &n).unwrap_err();
        assert_eq!(err.message, "depth must be non-negative, got: -1");
        let err = run(i.clone(), Tensor::from_slice::<i32>([1], &[3]).unwrap(), &n).unwrap_err();
        assert_eq!(err.message, "depth must be a scalar, but got: [1]");
        let err = run(i.clone(), Tensor::scalar(3i32), &one_hot_node(DType::F32, DType::I32, 3)).unwrap_err();
        assert_eq!(err.message, "Expected axis to be -1 or between [0, 2).  But received: 3");
        let err = run(i, Tensor::scalar(3i32), &one_hot_node(DType::F32, DType::I32, -2)).unwrap_err();
        assert_eq!(err.message, "Expected axis to be -1 or between [0, 2).  But received: -2");
    }
}
