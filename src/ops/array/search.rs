//! Binary searches: `LowerBound` and `UpperBound` (`tf.searchsorted`, one
//! sorted row per row of values) and `Bucketize` (a feature column's
//! bucket index against sorted float boundaries).
//!
//! Owns: these kernels. Must not hold state beyond parsed attributes.

use super::super::math::{REAL, require_dtype};
use super::super::registry::OpDef;
use super::super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::{AttrList, AttrValue, NodeSpec};
use crate::tensor::{DType, Element, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("LowerBound", bound_signature, build_bound),
    OpDef::kernel("UpperBound", bound_signature, build_bound),
    OpDef::kernel("Bucketize", bucketize_signature, build_bucketize),
];

fn bound_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let out = ValueType::Tensor(attr_index_type_or(node, "out_type", DType::I32)?);
    Ok(OpSignature::new(vec![t, t], vec![out]))
}

struct Bound {
    upper: bool,
    out_type: DType,
}

fn build_bound(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    require_dtype(&init.node.op, init.node.attr_dtype("T")?, REAL)?;
    let out_type = attr_index_type_or(init.node, "out_type", DType::I32)?;
    Ok(Box::new(Bound { upper: init.node.op == "UpperBound", out_type }))
}

impl OpKernel for Bound {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (sorted, values) = (ctx.input(0)?, ctx.input(1)?);
        let (Some((&n, sorted_rows)), Some((&v, value_rows))) =
            (sorted.dims().split_last(), values.dims().split_last())
        else {
            bail!(invalid_argument, "sorted_inputs and values must have at least one dimension");
        };
        if sorted_rows != value_rows {
            bail!(
                invalid_argument,
                "Leading dim_size of both tensors must match: sorted_inputs {} and values {}",
                sorted.shape(),
                values.shape()
            );
        }
        let found = match sorted.dtype() {
            DType::F32 => positions::<f32>(sorted, values, n, v, self.upper)?,
            DType::F64 => positions::<f64>(sorted, values, n, v, self.upper)?,
            DType::I32 => positions::<i32>(sorted, values, n, v, self.upper)?,
            DType::I64 => positions::<i64>(sorted, values, n, v, self.upper)?,
            other => bail!(invalid_argument, "{other} is not supported"),
        };
        let out = if self.out_type == DType::I64 {
            Tensor::from_map(values.shape().clone(), &found, |p| p as i64)?
        } else {
            if n > i32::MAX as usize {
                bail!(invalid_argument, "a row of {n} sorted inputs overflows out_type int32");
            }
            Tensor::from_map(values.shape().clone(), &found, |p| p as i32)?
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

/// For each value, how many of its row's sorted inputs are below it
/// (`upper`: at or below it).
fn positions<T: Element + PartialOrd + Copy>(
    sorted: &Tensor,
    values: &Tensor,
    n: usize,
    v: usize,
    upper: bool,
) -> Result<Vec<usize>> {
    let (sorted, values) = (sorted.as_slice::<T>()?, values.as_slice::<T>()?);
    let mut out = Vec::with_capacity(values.len());
    if v == 0 {
        return Ok(out);
    }
    for (row, vals) in values.chunks_exact(v).enumerate() {
        let row = &sorted[row * n..][..n];
        for &x in vals {
            out.push(if upper { row.partition_point(|&s| s <= x) } else { row.partition_point(|&s| s < x) });
        }
    }
    Ok(out)
}

fn bucketize_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t], vec![ValueType::Tensor(DType::I32)]))
}

struct Bucketize {
    boundaries: Vec<f32>,
}

fn build_bucketize(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    require_dtype(&node.op, node.attr_dtype("T")?, REAL)?;
    let boundaries = match node.get_attr("boundaries") {
        Some(AttrValue::List(AttrList::Float(v))) => v.clone(),
        // An empty list carries no element kind on the wire.
        None => Vec::new(),
        Some(AttrValue::List(AttrList::Int(v))) if v.is_empty() => Vec::new(),
        Some(AttrValue::List(AttrList::Bytes(v))) if v.is_empty() => Vec::new(),
        Some(other) => bail!(
            invalid_argument,
            "node '{}' (Bucketize): attr 'boundaries' should be a list of floats, got {other:?}",
            node.name
        ),
    };
    if boundaries.windows(2).any(|w| w[0] > w[1]) {
        bail!(invalid_argument, "node '{}' (Bucketize): Expected sorted boundaries", node.name);
    }
    Ok(Box::new(Bucketize { boundaries }))
}

impl OpKernel for Bucketize {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        let b = &self.boundaries;
        // The index of the first boundary above the value, compared as C++
        // compares the value with a float: doubles as doubles, the rest as
        // floats.
        let out = match x.dtype() {
            DType::F32 => Tensor::from_map(x.shape().clone(), x.as_slice::<f32>()?, |v| upper(b, |s| s <= v))?,
            DType::F64 => Tensor::from_map(x.shape().clone(), x.as_slice::<f64>()?, |v| upper(b, |s| s as f64 <= v))?,
            DType::I32 => Tensor::from_map(x.shape().clone(), x.as_slice::<i32>()?, |v| upper(b, |s| s <= v as f32))?,
            DType::I64 => Tensor::from_map(x.shape().clone(), x.as_slice::<i64>()?, |v| upper(b, |s| s <= v as f32))?,
            other => return Err(Status::invalid_argument(format!("Bucketize does not support {other}"))),
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

fn upper(boundaries: &[f32], at_or_below: impl Fn(f32) -> bool) -> i32 {
    boundaries.partition_point(|&s| at_or_below(s)) as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{node, run1, ty};

    #[test]
    fn bounds_search_each_row() {
        let sorted = Tensor::from_slice::<f32>([2, 4], &[1., 2., 2., 5., 0., 0., 3., 9.]).unwrap();
        let values = Tensor::from_slice::<f32>([2, 3], &[2., 0., 6., 0., 3., 10.]).unwrap();
        let lower = run1(&node("LowerBound").attr("T", ty(DType::F32)), &[sorted.clone(), values.clone()]).unwrap();
        assert_eq!(lower.as_slice::<i32>().unwrap(), &[1, 0, 4, 0, 2, 4]);
        let upper = node("UpperBound").attr("T", ty(DType::F32)).attr("out_type", ty(DType::I64));
        let upper = run1(&upper, &[sorted.clone(), values]).unwrap();
        assert_eq!(upper.as_slice::<i64>().unwrap(), &[3, 0, 4, 2, 3, 4]);
        let three_rows = Tensor::from_slice::<f32>([3, 1], &[1., 2., 3.]).unwrap();
        assert!(run1(&node("LowerBound").attr("T", ty(DType::F32)), &[sorted, three_rows]).is_err());
    }

    #[test]
    fn bucketize_counts_boundaries_at_or_below() {
        let bucketize = node("Bucketize")
            .attr("T", ty(DType::I32))
            .attr("boundaries", AttrValue::List(AttrList::Float(vec![0.0, 10.0, 100.0])));
        let x = Tensor::from_slice::<i32>([5], &[-5, 0, 9, 10, 1000]).unwrap();
        assert_eq!(run1(&bucketize, &[x]).unwrap().as_slice::<i32>().unwrap(), &[0, 1, 1, 2, 3]);
        let unsorted = node("Bucketize")
            .attr("T", ty(DType::F32))
            .attr("boundaries", AttrValue::List(AttrList::Float(vec![1.0, 0.0])));
        let err = run1(&unsorted, &[Tensor::scalar(1.0f32)]).unwrap_err();
        assert!(err.message.contains("Expected sorted boundaries"), "{err}");
    }
}
