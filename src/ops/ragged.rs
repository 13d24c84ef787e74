//! Ragged tensors as TensorFlow's graphs carry them: flat values plus one
//! splits vector per ragged dimension (`tf.RaggedTensor`, what
//! `tf.strings.split` and Keras text layers produce). Kernels:
//! `RaggedRange` (`tf.ragged.range`, ragged `tf.tile`), `RaggedGather`
//! (`tf.gather` and `tf.concat` on ragged rows) and `RaggedTensorToSparse`
//! (`RaggedTensor.to_sparse`, `tf.sets` on split strings); making one dense
//! is `array::ragged_to_tensor`'s.
//!
//! Owns: these kernels and the splits checks they share (a splits vector
//! starts at 0, never decreases, and ends at the size of the level below),
//! each done before any value is read, so a malformed ragged tensor is an
//! error naming the input, never a read out of bounds. Must not hold state.

use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{
    KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_count, index_values, unsupported_dtype,
};
use crate::tensor::{DType, Shape, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("RaggedRange", range_signature, build_range),
    OpDef::kernel("RaggedGather", gather_signature, build_gather),
    OpDef::kernel("RaggedTensorToSparse", to_sparse_signature, build_to_sparse),
];

/// `Tsplits`: int32 or int64 (int64 by default).
fn splits_type(node: &NodeSpec) -> Result<DType> {
    let d = node.attr_dtype_or("Tsplits", DType::I64)?;
    if !matches!(d, DType::I32 | DType::I64) {
        bail!(invalid_argument, "node '{}' ({}): Tsplits must be int32 or int64, got {d}", node.name, node.op);
    }
    Ok(d)
}

/// A splits tensor of `dtype` holding `values`.
fn splits_tensor(dtype: DType, values: &[i64]) -> Result<Tensor> {
    match dtype {
        DType::I32 => {
            let narrowed = values
                .iter()
                .map(|&v| i32::try_from(v).map_err(|_| Status::invalid_argument(format!("split {v} overflows int32"))))
                .collect::<Result<Vec<_>>>()?;
            Tensor::from_slice::<i32>([values.len()], &narrowed)
        }
        _ => Tensor::from_slice::<i64>([values.len()], values),
    }
}

/// Splits `what` checked against the `below` rows of the next level.
fn checked_splits(t: &Tensor, below: usize, what: &str) -> Result<Vec<usize>> {
    if t.rank() != 1 || t.num_elements() == 0 {
        bail!(invalid_argument, "{what} must be a non-empty vector, got shape {}", t.shape());
    }
    let values = index_values(t, what)?;
    if values[0] != 0 {
        bail!(invalid_argument, "{what} must start with 0, got {}", values[0]);
    }
    if let Some(w) = values.windows(2).find(|w| w[1] < w[0]) {
        bail!(invalid_argument, "{what} must not decrease, got {} after {}", w[1], w[0]);
    }
    let last = *values.last().unwrap_or(&0);
    if last != below as i64 {
        bail!(invalid_argument, "{what} must end at {below} (the size of the level below), got {last}");
    }
    Ok(values.iter().map(|&v| v as usize).collect())
}

/// The nested splits inputs `first..first + count` checked level by level
/// against `values` (whose first dimension the innermost level splits).
fn nested_splits(ctx: &OpContext<'_>, first: usize, count: usize, values: &Tensor) -> Result<Vec<Vec<usize>>> {
    let mut levels = vec![Vec::new(); count];
    let mut below = values.dims().first().copied().unwrap_or(0);
    for k in (0..count).rev() {
        levels[k] = checked_splits(ctx.input(first + k)?, below, &format!("nested splits {k}"))?;
        below = levels[k].len() - 1;
    }
    Ok(levels)
}

// ---------------------------------------------------------------------------
// RaggedRange

fn range_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype_or("T", DType::I32)?);
    Ok(OpSignature::new(vec![t, t, t], vec![ValueType::Tensor(splits_type(node)?), t]))
}

struct Range {
    splits: DType,
}

fn build_range(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype_or("T", DType::I32)?;
    const ALLOWED: &[DType] = &[DType::F32, DType::F64, DType::I32, DType::I64];
    if !ALLOWED.contains(&dtype) {
        return Err(unsupported_dtype(&init.node.op, dtype, ALLOWED));
    }
    Ok(Box::new(Range { splits: splits_type(init.node)? }))
}

/// A range's element type: its size as TensorFlow's `RangeSize` computes
/// it (integer division rounding up; `ceil` of the quotient for floats).
trait RangeValue: crate::tensor::Element + PartialOrd {
    fn size(start: Self, limit: Self, delta: Self) -> u64;
    fn step(self, delta: Self) -> Self;
    fn is_zero(self) -> bool;
}

macro_rules! integer_range {
    ($t:ty) => {
        impl RangeValue for $t {
            fn size(start: $t, limit: $t, delta: $t) -> u64 {
                if (delta > 0 && limit < start) || (delta < 0 && limit > start) {
                    return 0;
                }
                let (span, step) = ((limit as i128 - start as i128).abs(), (delta as i128).abs());
                ((span + step - 1) / step) as u64
            }
            fn step(self, delta: $t) -> $t {
                self.wrapping_add(delta)
            }
            fn is_zero(self) -> bool {
                self == 0
            }
        }
    };
}
integer_range!(i32);
integer_range!(i64);

macro_rules! float_range {
    ($t:ty) => {
        impl RangeValue for $t {
            fn size(start: $t, limit: $t, delta: $t) -> u64 {
                if (delta > 0.0 && limit < start) || (delta < 0.0 && limit > start) {
                    return 0;
                }
                ((limit - start) / delta).abs().ceil() as u64
            }
            fn step(self, delta: $t) -> $t {
                self + delta
            }
            fn is_zero(self) -> bool {
                self == 0.0
            }
        }
    };
}
float_range!(f32);
float_range!(f64);

impl OpKernel for Range {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (splits, values) = match ctx.input(0)?.dtype() {
            DType::F32 => ranges::<f32>(ctx)?,
            DType::F64 => ranges::<f64>(ctx)?,
            DType::I32 => ranges::<i32>(ctx)?,
            _ => ranges::<i64>(ctx)?,
        };
        ctx.set_output(0, splits_tensor(self.splits, &splits)?);
        ctx.set_output(1, values);
        Ok(())
    }
}

/// The splits and values of one range per row of the (broadcast) inputs.
fn ranges<T: RangeValue>(ctx: &OpContext<'_>) -> Result<(Vec<i64>, Tensor)> {
    let names = ["starts", "limits", "deltas"];
    let mut rows = 1;
    let mut any_vector = false;
    for (i, name) in names.iter().enumerate() {
        let t = ctx.input(i)?;
        if t.rank() > 1 {
            bail!(invalid_argument, "{name} must be a scalar or vector");
        }
        if t.rank() == 1 {
            if any_vector && t.num_elements() != rows {
                bail!(invalid_argument, "starts, limits, and deltas must have the same shape");
            }
            rows = t.num_elements();
            any_vector = true;
        }
    }
    let inputs = [ctx.input(0)?, ctx.input(1)?, ctx.input(2)?];
    let slices = [inputs[0].as_slice::<T>()?, inputs[1].as_slice::<T>()?, inputs[2].as_slice::<T>()?];
    let at = |k: usize, row: usize| if inputs[k].rank() == 0 { slices[k][0] } else { slices[k][row] };
    let mut splits = Vec::with_capacity(rows + 1);
    splits.push(0i64);
    for row in 0..rows {
        let delta = at(2, row);
        if delta.is_zero() {
            bail!(invalid_argument, "Requires delta != 0");
        }
        let size = T::size(at(0, row), at(1, row), delta);
        let total = splits[row] as u64 + size;
        if total > i64::MAX as u64 / 2 {
            bail!(invalid_argument, "The total range size overflowed");
        }
        splits.push(total as i64);
    }
    let mut values = Vec::with_capacity(splits[rows] as usize);
    for row in 0..rows {
        let (mut value, delta) = (at(0, row), at(2, row));
        for _ in splits[row]..splits[row + 1] {
            values.push(value);
            value = value.step(delta);
        }
    }
    let count = values.len();
    Ok((splits, Tensor::from_slice::<T>([count], &values)?))
}

// ---------------------------------------------------------------------------
// RaggedGather

/// `[Tsplits x PARAMS_RAGGED_RANK, Tvalues, Tindices] -> [Tsplits x
/// OUTPUT_RAGGED_RANK, Tvalues]`.
fn gather_signature(node: &NodeSpec) -> Result<OpSignature> {
    let splits = ValueType::Tensor(splits_type(node)?);
    let values = ValueType::Tensor(node.attr_dtype("Tvalues")?);
    let params_rank = attr_count(node, "PARAMS_RAGGED_RANK", 1)?;
    let output_rank = attr_count(node, "OUTPUT_RAGGED_RANK", 0)?;
    let mut inputs = vec![splits; params_rank];
    inputs.extend([values, ValueType::Tensor(node.attr_dtype("Tindices")?)]);
    let mut outputs = vec![splits; output_rank];
    outputs.push(values);
    Ok(OpSignature::new(inputs, outputs))
}

struct Gather {
    params_rank: usize,
    output_rank: usize,
    splits: DType,
}

fn build_gather(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    Ok(Box::new(Gather {
        params_rank: attr_count(node, "PARAMS_RAGGED_RANK", 1)?,
        output_rank: attr_count(node, "OUTPUT_RAGGED_RANK", 0)?,
        splits: splits_type(node)?,
    }))
}

impl OpKernel for Gather {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let values = ctx.input(self.params_rank)?.clone();
        let indices = ctx.input(self.params_rank + 1)?.clone();
        if self.output_rank != self.params_rank + indices.rank().max(1) - 1 {
            bail!(
                invalid_argument,
                "OUTPUT_RAGGED_RANK {} must be PARAMS_RAGGED_RANK {} + indices' rank {} - 1",
                self.output_rank,
                self.params_rank,
                indices.rank()
            );
        }
        let levels = nested_splits(ctx, 0, self.params_rank, &values)?;
        let rows = levels[0].len() - 1;
        let picks = index_values(&indices, "indices")?;
        let mut outputs: Vec<Vec<i64>> = Vec::with_capacity(self.output_rank);
        // Indices of rank > 1 add uniform levels on top.
        let dims = indices.dims();
        for k in 1..dims.len() {
            let (outer, size): (usize, usize) = (dims[..k].iter().product(), dims[k]);
            outputs.push((0..=outer).map(|i| (i * size) as i64).collect());
        }
        let mut ranges = Vec::with_capacity(picks.len());
        for (i, &p) in picks.iter().enumerate() {
            match usize::try_from(p) {
                Ok(row) if row < rows => ranges.push((levels[0][row], levels[0][row + 1])),
                _ => bail!(
                    invalid_argument,
                    "indices{} = {p} is not in [0, {rows})",
                    crate::ops::training::flat_position(indices.shape(), i)
                ),
            }
        }
        let mut first = vec![0i64];
        for &(a, b) in &ranges {
            first.push(first[first.len() - 1] + (b - a) as i64);
        }
        outputs.push(first);
        for level in &levels[1..] {
            let mut splits = vec![0i64];
            for &(a, b) in &ranges {
                for j in a..b {
                    splits.push(splits[splits.len() - 1] + (level[j + 1] - level[j]) as i64);
                }
            }
            outputs.push(splits);
            ranges = ranges.iter().map(|&(a, b)| (level[a], level[b])).collect();
        }
        let order: Vec<usize> = ranges.iter().flat_map(|&(a, b)| a..b).collect();
        let gathered = crate::ops::array::take_rows(&values, &order)?;
        for (k, splits) in outputs.iter().enumerate() {
            ctx.set_output(k, splits_tensor(self.splits, splits)?);
        }
        ctx.set_output(self.output_rank, gathered);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// RaggedTensorToSparse

/// `[Tsplits x RAGGED_RANK, T] -> [int64, T, int64]`.
fn to_sparse_signature(node: &NodeSpec) -> Result<OpSignature> {
    let splits = ValueType::Tensor(splits_type(node)?);
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let mut inputs = vec![splits; attr_count(node, "RAGGED_RANK", 1)?];
    inputs.push(t);
    let i64 = ValueType::Tensor(DType::I64);
    Ok(OpSignature::new(inputs, vec![i64, t, i64]))
}

struct ToSparse {
    ragged_rank: usize,
}

fn build_to_sparse(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(ToSparse { ragged_rank: attr_count(init.node, "RAGGED_RANK", 1)? }))
}

impl OpKernel for ToSparse {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let values = ctx.input(self.ragged_rank)?.clone();
        if values.rank() == 0 {
            bail!(invalid_argument, "rt_dense_values must have rank at least 1, got a scalar");
        }
        let levels = nested_splits(ctx, 0, self.ragged_rank, &values)?;
        // The index prefix of each row at each level, outermost first.
        let mut prefixes: Vec<Vec<i64>> = (0..levels[0].len() - 1).map(|r| vec![r as i64]).collect();
        let mut shape = vec![prefixes.len() as i64];
        for level in &levels {
            let mut next = Vec::with_capacity(level[level.len() - 1]);
            let mut widest = 0;
            for (r, prefix) in prefixes.iter().enumerate() {
                widest = widest.max(level[r + 1] - level[r]);
                for p in 0..level[r + 1] - level[r] {
                    let mut index = prefix.clone();
                    index.push(p as i64);
                    next.push(index);
                }
            }
            shape.push(widest as i64);
            prefixes = next;
        }
        let inner_dims = &values.dims()[1..];
        shape.extend(inner_dims.iter().map(|&d| d as i64));
        let inner: usize = inner_dims.iter().product();
        let rank = shape.len();
        let mut indices = Vec::with_capacity(values.num_elements() * rank);
        for prefix in &prefixes {
            for e in 0..inner {
                indices.extend_from_slice(prefix);
                let mut rest = e;
                let start = indices.len();
                indices.resize(start + inner_dims.len(), 0);
                for (slot, &d) in indices[start..].iter_mut().zip(inner_dims).rev() {
                    *slot = (rest % d) as i64;
                    rest /= d;
                }
            }
        }
        let count = prefixes.len() * inner;
        let flat = values.reshaped(Shape::from_vec(vec![count]))?;
        ctx.set_output(0, Tensor::from_slice::<i64>([count, rank], &indices)?);
        ctx.set_output(1, flat);
        ctx.set_output(2, Tensor::from_slice::<i64>([rank], &shape)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run_all, ty};
    use crate::tensor::{DType, Tensor};

    fn i64s(v: &[i64]) -> Tensor {
        Tensor::from_slice::<i64>([v.len()], v).unwrap()
    }

    #[test]
    fn ranges_round_up_and_refuse_a_zero_step() {
        // tf.ragged.range([0, 5, 3], [5, 0, 4], [2, -2, 1]): [[0, 2, 4], [5, 3, 1], [3]].
        let out = run_all(
            &node("RaggedRange").attr("T", ty(DType::I64)),
            &[i64s(&[0, 5, 3]), i64s(&[5, 0, 4]), i64s(&[2, -2, 1])],
        )
        .unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), &[0, 3, 6, 7]);
        assert_eq!(out[1].as_slice::<i64>().unwrap(), &[0, 2, 4, 5, 3, 1, 3]);
        // Floats step by repeated addition, a scalar broadcast over rows.
        let f = |v: &[f32]| Tensor::from_slice::<f32>([v.len()], v).unwrap();
        let out = run_all(
            &node("RaggedRange").attr("T", ty(DType::F32)).attr("Tsplits", ty(DType::I32)),
            &[f(&[0.5, 2.0]), Tensor::scalar(2.0f32), Tensor::scalar(0.75f32)],
        )
        .unwrap();
        assert_eq!(out[0].as_slice::<i32>().unwrap(), &[0, 2, 2]);
        assert_eq!(out[1].as_slice::<f32>().unwrap(), &[0.5, 1.25]);
        let err = run_all(&node("RaggedRange").attr("T", ty(DType::I64)), &[i64s(&[0]), i64s(&[3]), i64s(&[0])]);
        assert_eq!(err.unwrap_err().message, "Requires delta != 0");
    }

    fn gather(params_rank: i64, output_rank: i64) -> crate::graph::spec::NodeSpec {
        node("RaggedGather")
            .attr("Tvalues", ty(DType::I64))
            .attr("Tindices", ty(DType::I32))
            .attr("PARAMS_RAGGED_RANK", AttrValue::Int(params_rank))
            .attr("OUTPUT_RAGGED_RANK", AttrValue::Int(output_rank))
    }

    #[test]
    fn gathers_rows_of_every_level() {
        // [[[0, 1, 2]], [], [[], [3, 4]]]: outer splits [0, 1, 1, 3], inner [0, 3, 3, 5].
        let (outer, inner, values) = (i64s(&[0, 1, 1, 3]), i64s(&[0, 3, 3, 5]), i64s(&[0, 1, 2, 3, 4]));
        let picks = Tensor::from_slice::<i32>([3], &[2, 0, 2]).unwrap();
        let out = run_all(&gather(2, 2), &[outer.clone(), inner.clone(), values.clone(), picks]).unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), &[0, 2, 3, 5]);
        assert_eq!(out[1].as_slice::<i64>().unwrap(), &[0, 0, 2, 5, 5, 7]);
        assert_eq!(out[2].as_slice::<i64>().unwrap(), &[3, 4, 0, 1, 2, 3, 4]);
        let bad = Tensor::from_slice::<i32>([2], &[0, 3]).unwrap();
        let err = run_all(&gather(2, 2), &[outer.clone(), inner.clone(), values.clone(), bad]).unwrap_err();
        assert_eq!(err.message, "indices[1] = 3 is not in [0, 3)");
        let torn = i64s(&[0, 3, 2, 5]);
        let picks = Tensor::from_slice::<i32>([1], &[0]).unwrap();
        let err = run_all(&gather(2, 2), &[outer, torn, values, picks]).unwrap_err();
        assert!(err.message.contains("nested splits 1 must not decrease"), "{err}");
    }

    #[test]
    fn to_sparse_numbers_every_element() {
        // [[[0, 1], [2, 3]], [], [[4, 5]]] with a dense inner dimension of 2.
        let values = Tensor::from_slice::<i64>([3, 2], &[0, 1, 2, 3, 4, 5]).unwrap();
        let spec = node("RaggedTensorToSparse").attr("T", ty(DType::I64)).attr("RAGGED_RANK", AttrValue::Int(1));
        let out = run_all(&spec, &[i64s(&[0, 2, 2, 3]), values]).unwrap();
        assert_eq!(out[0].dims(), &[6, 3]);
        #[rustfmt::skip]
        let want = [0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 1, 2, 0, 0, 2, 0, 1];
        assert_eq!(out[0].as_slice::<i64>().unwrap(), &want);
        assert_eq!(out[1].as_slice::<i64>().unwrap(), &[0, 1, 2, 3, 4, 5]);
        assert_eq!(out[2].as_slice::<i64>().unwrap(), &[3, 2, 2]);
    }
}
