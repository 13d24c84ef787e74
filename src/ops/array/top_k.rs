//! TopKV2: the `k` largest entries of each row (along the last dimension)
//! and their indices; `InTopK`/`InTopKV2` (`tf.math.in_top_k`, Keras'
//! top-k accuracy): whether each row's target class is among its `k`
//! largest predictions, counting ties in its favour (fewer than `k`
//! classes strictly above it), false for a row holding a non-finite
//! prediction or a target outside the row.
//!
//! Owns: this kernel and its signature. Must not hold state beyond parsed
//! attributes.
//!
//! Order, as TensorFlow's CPU kernel: values descending, equal values by
//! lower index first. TensorFlow leaves NaN's place unspecified (its
//! comparisons treat NaN as equal to everything, so where a NaN lands
//! depends on the algorithm it picks for the row: of `[1, NaN, 3, 2]` its
//! top 2 are `[NaN, 3]` but its top 1 is `[3]`); here NaN ranks above
//! every number, always.
//! `sorted = false` only allows any order, so the sorted one is given.
//!
//! Each row is an index partition (`select_nth_unstable`, O(cols)) plus a
//! sort of the `k` chosen; `k == 1` is one scan.

use super::super::math::REAL;
use super::super::numeric::Num;
use super::super::registry::OpDef;
use super::super::{
    KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or, index_values, unsupported_dtype,
};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Element, Shape, Tensor};
use std::cmp::Ordering;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("TopKV2", top_k_signature, build_top_k),
    OpDef::kernel("InTopK", in_top_k_signature::<false>, build_in_top_k::<false>),
    OpDef::kernel("InTopKV2", in_top_k_signature::<true>, build_in_top_k::<true>),
];

/// `[float, T(, T)] -> [bool]`: predictions, targets (and k for V2).
fn in_top_k_signature<const V2: bool>(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(attr_index_type_or(node, "T", DType::I32)?);
    let mut inputs = vec![ValueType::Tensor(DType::F32), t];
    if V2 {
        inputs.push(t);
    }
    Ok(OpSignature::new(inputs, vec![ValueType::Tensor(DType::Bool)]))
}

struct InTopK {
    /// The attr `k` of `InTopK`; `InTopKV2` reads its input.
    k: Option<i64>,
}

fn build_in_top_k<const V2: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(InTopK { k: if V2 { None } else { Some(init.node.attr_int("k")?) } }))
}

impl OpKernel for InTopK {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (predictions, targets) = (ctx.input(0)?, ctx.input(1)?);
        let k = match self.k {
            Some(k) => k,
            None => {
                let k = ctx.input(2)?;
                if k.rank() != 0 {
                    bail!(invalid_argument, "k must be a scalar, got shape {}", k.shape());
                }
                index_values(k, "k")?[0]
            }
        };
        if predictions.rank() != 2 {
            bail!(invalid_argument, "predictions must be 2-dimensional, got shape {}", predictions.shape());
        }
        let (rows, classes) = (predictions.dims()[0], predictions.dims()[1]);
        if targets.rank() != 1 || targets.dims()[0] != rows {
            bail!(
                invalid_argument,
                "First dimension of predictions {rows} must match length of targets {}",
                targets.shape()
            );
        }
        let predictions = predictions.as_slice::<f32>()?;
        let targets = index_values(targets, "targets")?;
        let mut out = Vec::with_capacity(rows);
        for (row, &target) in predictions.chunks_exact(classes.max(1)).take(rows).zip(targets.iter()) {
            let hit = usize::try_from(target).ok().and_then(|t| row.get(t)).is_some_and(|&p| {
                p.is_finite()
                    && row.iter().all(|x| x.is_finite())
                    && (row.iter().filter(|&&x| x > p).count() as i64) < k
            });
            out.push(hit);
        }
        out.resize(rows, false);
        ctx.set_output(0, Tensor::from_slice::<bool>([rows].as_slice(), &out)?);
        Ok(())
    }
}

/// `[T, Tk] -> [T, index_type]`; Tk and index_type are int32 by default.
fn top_k_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let k = ValueType::Tensor(attr_index_type_or(node, "Tk", DType::I32)?);
    let index = ValueType::Tensor(attr_index_type_or(node, "index_type", DType::I32)?);
    Ok(OpSignature::new(vec![t, k], vec![t, index]))
}

/// The element type of the indices output.
trait OutIndex: Element {
    fn from_position(i: usize) -> Self;
}

impl OutIndex for i32 {
    #[inline(always)]
    fn from_position(i: usize) -> i32 {
        // A row is at most i32::MAX long when int32 indices are asked for.
        i as i32
    }
}

impl OutIndex for i64 {
    #[inline(always)]
    fn from_position(i: usize) -> i64 {
        i as i64
    }
}

type TopKFn = fn(&Tensor, usize) -> Result<(Tensor, Tensor)>;

struct TopKKernel {
    top_k: TopKFn,
}

fn build_top_k(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    // Any order is allowed without `sorted`; the sorted one is given.
    init.node.attr_bool_or("sorted", true)?;
    let wide = attr_index_type_or(init.node, "index_type", DType::I32)? == DType::I64;
    let top_k: TopKFn = match (dtype, wide) {
        (DType::F32, false) => top_k::<f32, i32>,
        (DType::F64, false) => top_k::<f64, i32>,
        (DType::I32, false) => top_k::<i32, i32>,
        (DType::I64, false) => top_k::<i64, i32>,
        (DType::F32, true) => top_k::<f32, i64>,
        (DType::F64, true) => top_k::<f64, i64>,
        (DType::I32, true) => top_k::<i32, i64>,
        (DType::I64, true) => top_k::<i64, i64>,
        _ => {
            return Err(unsupported_dtype("TopKV2", dtype, REAL));
        }
    };
    Ok(Box::new(TopKKernel { top_k }))
}

impl OpKernel for TopKKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let k_t = ctx.input(1)?;
        if k_t.rank() != 0 {
            bail!(invalid_argument, "k must be scalar, got shape {}", k_t.shape());
        }
        let k = index_values(k_t, "k")?[0];
        let Ok(k) = usize::try_from(k) else {
            bail!(invalid_argument, "Need k >= 0, got {k}");
        };
        let input = ctx.input(0)?;
        let Some(&cols) = input.dims().last() else {
            bail!(invalid_argument, "input must be >= 1-D, got shape {}", input.shape());
        };
        if cols < k {
            bail!(invalid_argument, "input must have at least k columns. Had {cols}, needed {k}");
        }
        let (values, indices) = (self.top_k)(input, k)?;
        ctx.set_output(0, values);
        ctx.set_output(1, indices);
        Ok(())
    }
}

/// Whether `(a, i)` ranks before `(b, j)`: larger first, NaN largest, ties
/// by lower index. A total order, so an unstable sort gives one answer.
#[inline(always)]
fn rank_order<T: Num>(a: T, i: usize, b: T, j: usize) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (false, false) => b.partial_cmp(&a).unwrap_or(Ordering::Equal).then(i.cmp(&j)),
        (true, true) => i.cmp(&j),
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
    }
}

/// The top `k` (≤ the last dimension) of each row of `input`.
fn top_k<T: Num, I: OutIndex>(input: &Tensor, k: usize) -> Result<(Tensor, Tensor)> {
    let dims = input.dims();
    let cols = dims[dims.len() - 1];
    let mut out_shape = Shape::new(&dims[..dims.len() - 1]);
    out_shape.push(k);
    if I::DTYPE == DType::I32 && cols > i32::MAX as usize {
        bail!(invalid_argument, "input has {cols} columns, too many for int32 indices");
    }
    let x = input.as_slice::<T>()?;
    let mut values = Tensor::zeros(T::DTYPE, out_shape.clone())?;
    let mut indices = Tensor::zeros(I::DTYPE, out_shape)?;
    if k == 0 || x.is_empty() {
        return Ok((values, indices));
    }
    let (Some(vals), Some(idxs)) = (values.try_slice_mut::<T>(), indices.try_slice_mut::<I>()) else {
        bail!(internal, "fresh tensors are uniquely owned");
    };
    let mut order: Vec<usize> = Vec::with_capacity(if k == 1 { 0 } else { cols });
    for ((row, vrow), irow) in x.chunks_exact(cols).zip(vals.chunks_exact_mut(k)).zip(idxs.chunks_exact_mut(k)) {
        if k == 1 {
            let mut best = 0;
            for j in 1..cols {
                if rank_order(row[j], j, row[best], best) == Ordering::Less {
                    best = j;
                }
            }
            vrow[0] = row[best];
            irow[0] = I::from_position(best);
            continue;
        }
        order.clear();
        order.extend(0..cols);
        let by_rank = |&i: &usize, &j: &usize| rank_order(row[i], i, row[j], j);
        if k < cols {
            order.select_nth_unstable_by(k - 1, by_rank);
        }
        order[..k].sort_unstable_by(by_rank);
        for ((v, o), &j) in vrow.iter_mut().zip(irow.iter_mut()).zip(&order[..k]) {
            *v = row[j];
            *o = I::from_position(j);
        }
    }
    Ok((values, indices))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::resource::ResourceMgr;
    use crate::ops::testing::{node, run1, ty};
    use crate::ops::{Value, run_kernel_once};

    fn run(n: &NodeSpec, x: Tensor, k: Tensor) -> Result<(Tensor, Tensor)> {
        let mut outs = run_kernel_once(n, vec![Value::Tensor(x), Value::Tensor(k)], &ResourceMgr::default())?;
        let i = outs.pop().unwrap().into_tensor()?;
        Ok((outs.pop().unwrap().into_tensor()?, i))
    }
    fn f32s(dims: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(dims, v).unwrap()
    }
    fn top_k_node(t: DType) -> NodeSpec {
        node("TopKV2").attr("T", ty(t))
    }

    #[test]
    fn ties_take_the_lower_index() {
        // tf.math.top_k([1., 3., 3., 2., 3.], 3) == ([3, 3, 3], [1, 2, 4])
        let (v, i) = run(&top_k_node(DType::F32), f32s(&[5], &[1., 3., 3., 2., 3.]), Tensor::scalar(3i32)).unwrap();
        assert_eq!(v.as_slice::<f32>().unwrap(), &[3., 3., 3.]);
        assert_eq!(i.dtype(), DType::I32);
        assert_eq!(i.as_slice::<i32>().unwrap(), &[1, 2, 4]);
    }

    #[test]
    fn rows_k_one_and_k_all() {
        let x = f32s(&[2, 4], &[5., 1., 4., 2., -1., -3., 0., -2.]);
        let (v, i) = run(&top_k_node(DType::F32), x.clone(), Tensor::scalar(2i32)).unwrap();
        assert_eq!(v.dims(), &[2, 2]);
        assert_eq!(v.as_slice::<f32>().unwrap(), &[5., 4., 0., -1.]);
        assert_eq!(i.as_slice::<i32>().unwrap(), &[0, 2, 2, 0]);
        let (v, i) = run(&top_k_node(DType::F32), x.clone(), Tensor::scalar(1i32)).unwrap();
        assert_eq!(v.as_slice::<f32>().unwrap(), &[5., 0.]);
        assert_eq!(i.as_slice::<i32>().unwrap(), &[0, 2]);
        let (v, i) = run(&top_k_node(DType::F32), x.clone(), Tensor::scalar(4i64)).unwrap();
        assert_eq!(v.as_slice::<f32>().unwrap(), &[5., 4., 2., 1., 0., -1., -2., -3.]);
        assert_eq!(i.as_slice::<i32>().unwrap(), &[0, 2, 3, 1, 2, 0, 3, 1]);
        // int64 values and indices; sorted=false gives the sorted order.
        let n = node("TopKV2")
            .attr("T", ty(DType::I64))
            .attr("index_type", ty(DType::I64))
            .attr("sorted", AttrValue::Bool(false));
        let l = Tensor::from_slice::<i64>([5], &[7, 9, -2, 9, 0]).unwrap();
        let (v, i) = run(&n, l, Tensor::scalar(3i32)).unwrap();
        assert_eq!(v.as_slice::<i64>().unwrap(), &[9, 9, 7]);
        assert_eq!(i.as_slice::<i64>().unwrap(), &[1, 3, 0]);
    }

    #[test]
    fn nan_ranks_first() {
        // tf.math.top_k([1., nan, 3., 2.], 2) == ([nan, 3], [1, 2])
        let (v, i) = run(&top_k_node(DType::F32), f32s(&[4], &[1., f32::NAN, 3., 2.]), Tensor::scalar(2i32)).unwrap();
        let v = v.as_slice::<f32>().unwrap();
        assert!(v[0].is_nan());
        assert_eq!(v[1], 3.);
        assert_eq!(i.as_slice::<i32>().unwrap(), &[1, 2]);
    }

    #[test]
    fn empty_and_errors() {
        let n = top_k_node(DType::F32);
        let (v, i) = run(&n, f32s(&[2, 3], &[0.; 6]), Tensor::scalar(0i32)).unwrap();
        assert_eq!((v.dims(), i.dims()), (&[2, 0][..], &[2, 0][..]));
        let (v, _) = run(&n, Tensor::zeros(DType::F32, [0, 3]).unwrap(), Tensor::scalar(2i32)).unwrap();
        assert_eq!(v.dims(), &[0, 2]);
        let err = run(&n, f32s(&[2], &[1., 2.]), Tensor::scalar(3i32)).unwrap_err();
        assert_eq!(err.message, "input must have at least k columns. Had 2, needed 3");
        let err = run(&n, Tensor::scalar(1.0f32), Tensor::scalar(1i32)).unwrap_err();
        assert_eq!(err.message, "input must be >= 1-D, got shape []");
        let err = run(&n, f32s(&[2], &[1., 2.]), Tensor::scalar(-1i32)).unwrap_err();
        assert_eq!(err.message, "Need k >= 0, got -1");
        let err = run(&n, f32s(&[2], &[1., 2.]), Tensor::from_slice::<i32>([1], &[1]).unwrap()).unwrap_err();
        assert_eq!(err.message, "k must be scalar, got shape [1]");
    }

    #[test]
    fn in_top_k_counts_ties_for_the_target_and_refuses_non_finite_rows() {
        // TensorFlow 2.21's tf.raw_ops.InTopKV2 on the same inputs.
        let v2 = node("InTopKV2").attr("T", ty(DType::I32));
        let predictions =
            Tensor::from_slice::<f32>([3, 4].as_slice(), &[0.1, 0.5, 0.5, 0.2, f32::NAN, 1., 2., 3., 1., 2., 3., 4.])
                .unwrap();
        let targets = Tensor::from_slice::<i32>([3].as_slice(), &[2, 0, 7]).unwrap();
        let got = run1(&v2, &[predictions, targets, Tensor::scalar(1i32)]).unwrap();
        assert_eq!(got.as_slice::<bool>().unwrap(), [true, false, false]);
        let predictions =
            Tensor::from_slice::<f32>([2, 4].as_slice(), &[0.1, 0.5, 0.5, 0.2, 1., f32::INFINITY, 2., 3.]).unwrap();
        let targets = Tensor::from_slice::<i32>([2].as_slice(), &[1, 3]).unwrap();
        let v1 = node("InTopK").attr("T", ty(DType::I32)).attr("k", AttrValue::Int(2));
        assert_eq!(run1(&v1, &[predictions, targets]).unwrap().as_slice::<bool>().unwrap(), [true, false]);
    }
}
