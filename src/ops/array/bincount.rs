//! Counting into bins: `Bincount`, `DenseBincount` and `RaggedBincount`
//! (`tf.math.bincount`, Keras `CategoryEncoding`'s count and multi-hot
//! modes, `TextVectorization`'s multi-hot, count and tf-idf outputs, one
//! row of bins per ragged row) and `HistogramFixedWidth`
//! (`tf.histogram_fixed_width`).
//!
//! Owns: these kernels and their signatures. Must not hold state.
//!
//! TensorFlow's rules are kept: a negative value is an error, a value at or
//! past `size` is dropped, empty weights count 1 each, `binary_output` marks
//! presence (weights ignored); a histogram clamps values to its range and
//! places each with TensorFlow's arithmetic (the offset from the low edge
//! in the element type, the bin as f64), and refuses NaN.

use super::super::math::REAL;
use super::super::numeric::Num;
use super::super::registry::OpDef;
use super::super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, index_values, unsupported_dtype};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Shape, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Bincount", bincount_signature, build_bincount),
    OpDef::kernel("DenseBincount", dense_bincount_signature, build_bincount),
    OpDef::kernel("RaggedBincount", ragged_bincount_signature, build_ragged_bincount),
    OpDef::kernel("HistogramFixedWidth", histogram_signature, build_histogram),
];

/// `[int32, int32, T] -> [T]`.
fn bincount_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let i = ValueType::Tensor(DType::I32);
    Ok(OpSignature::new(vec![i, i, t], vec![t]))
}

/// `[Tidx, Tidx, T] -> [T]`.
fn dense_bincount_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let i = ValueType::Tensor(node.attr_dtype_or("Tidx", DType::I32)?);
    Ok(OpSignature::new(vec![i, i, t], vec![t]))
}

/// `[int64 splits, Tidx values, Tidx size, T weights] -> [T]`.
fn ragged_bincount_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let i = ValueType::Tensor(node.attr_dtype_or("Tidx", DType::I64)?);
    Ok(OpSignature::new(vec![ValueType::Tensor(DType::I64), i, i, t], vec![t]))
}

struct BincountKernel {
    dtype: DType,
    binary: bool,
    /// `DenseBincount` takes a batch of rows; `Bincount` flattens.
    rows: bool,
}

/// The node's `T`, which must be a real type.
fn real_dtype(node: &NodeSpec) -> Result<DType> {
    let dtype = node.attr_dtype("T")?;
    if !REAL.contains(&dtype) {
        return Err(unsupported_dtype(&node.op, dtype, REAL));
    }
    Ok(dtype)
}

fn build_bincount(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = real_dtype(init.node)?;
    let rows = init.node.op == "DenseBincount";
    let binary = rows && init.node.attr_bool_or("binary_output", false)?;
    Ok(Box::new(BincountKernel { dtype, binary, rows }))
}

impl OpKernel for BincountKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (input, size, weights) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        if size.rank() != 0 {
            bail!(invalid_argument, "Shape must be rank 0 but is rank {} for size", size.rank());
        }
        let size = index_values(size, "size")?[0];
        if size < 0 {
            bail!(invalid_argument, "size ({size}) must be non-negative");
        }
        let size = size as usize;
        if self.rows && input.rank() > 2 {
            bail!(invalid_argument, "Shape must be at most rank 2 but is rank {}", input.rank());
        }
        if weights.num_elements() != 0 && weights.dims() != input.dims() {
            bail!(
                invalid_argument,
                "Input arr and weights must have the same shape: arr {}, weights {}",
                input.shape(),
                weights.shape()
            );
        }
        if weights.num_elements() != 0 && weights.dtype() != self.dtype {
            bail!(invalid_argument, "weights must be {}, got {}", self.dtype, weights.dtype());
        }
        let values = index_values(input, "arr")?;
        if values.iter().any(|&v| v < 0) {
            bail!(invalid_argument, "Input arr must be non-negative!");
        }
        let (batch, dims) = match (self.rows, input.rank()) {
            (true, 2) => (input.dims()[0], vec![input.dims()[0], size]),
            _ => (1, vec![size]),
        };
        let per_row = values.len().checked_div(batch).unwrap_or(0).max(1);
        let out = count_as(self.dtype, &values, weights, &|i| i / per_row, size, dims, self.binary)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

fn count_as(
    dtype: DType,
    values: &[i64],
    weights: &Tensor,
    row_of: &dyn Fn(usize) -> usize,
    size: usize,
    dims: Vec<usize>,
    binary: bool,
) -> Result<Tensor> {
    match dtype {
        DType::F32 => count::<f32>(values, weights, row_of, size, dims, binary),
        DType::F64 => count::<f64>(values, weights, row_of, size, dims, binary),
        DType::I32 => count::<i32>(values, weights, row_of, size, dims, binary),
        DType::I64 => count::<i64>(values, weights, row_of, size, dims, binary),
        other => unreachable!("{other} was refused when the kernel was built"),
    }
}

struct RaggedBincountKernel {
    dtype: DType,
    binary: bool,
}

fn build_ragged_bincount(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = real_dtype(init.node)?;
    Ok(Box::new(RaggedBincountKernel { dtype, binary: init.node.attr_bool_or("binary_output", false)? }))
}

impl OpKernel for RaggedBincountKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (splits, input, size, weights) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, ctx.input(3)?);
        let size = index_values(size, "size")?.first().copied().filter(|_| size.rank() == 0);
        let Some(size) = size.and_then(|s| usize::try_from(s).ok()) else {
            bail!(invalid_argument, "size must be a non-negative scalar");
        };
        let values = index_values(input, "values")?;
        let splits = index_values(splits, "splits")?;
        if splits.first() != Some(&0)
            || splits.last() != Some(&(values.len() as i64))
            || splits.windows(2).any(|w| w[1] < w[0])
        {
            bail!(
                invalid_argument,
                "splits must start at 0, never decrease and end at the {} values, got {splits:?}",
                values.len()
            );
        }
        if weights.num_elements() != 0 && weights.num_elements() != values.len() {
            bail!(invalid_argument, "{} weights for {} values", weights.num_elements(), values.len());
        }
        if weights.num_elements() != 0 && weights.dtype() != self.dtype {
            bail!(invalid_argument, "weights must be {}, got {}", self.dtype, weights.dtype());
        }
        if values.iter().any(|&v| v < 0) {
            bail!(invalid_argument, "Input must be non-negative");
        }
        let rows = splits.len() - 1;
        let mut row_of_value = Vec::with_capacity(values.len());
        for (row, w) in splits.windows(2).enumerate() {
            row_of_value.extend(std::iter::repeat_n(row, (w[1] - w[0]) as usize));
        }
        let out = count_as(self.dtype, &values, weights, &|i| row_of_value[i], size, vec![rows, size], self.binary)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

/// Adds each value's weight (1 when `weights` is empty) into its row's bin;
/// `binary`: marks each hit bin 1 instead.
fn count<T: Num>(
    values: &[i64],
    weights: &Tensor,
    row_of: &dyn Fn(usize) -> usize,
    size: usize,
    dims: Vec<usize>,
    binary: bool,
) -> Result<Tensor> {
    let weights = if weights.num_elements() == 0 { None } else { Some(weights.as_slice::<T>()?) };
    Tensor::build::<T>(Shape::from(dims.as_slice()), |bins| {
        bins.fill(T::ZERO);
        for (i, &v) in values.iter().enumerate() {
            let v = v as usize;
            if v >= size {
                continue;
            }
            let bin = &mut bins[row_of(i) * size + v];
            *bin = match (binary, weights) {
                (true, _) => T::ONE,
                (false, Some(w)) => bin.add(w[i]),
                (false, None) => bin.add(T::ONE),
            };
        }
    })
}

/// `[T, T, int32] -> [dtype]`.
fn histogram_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let out = ValueType::Tensor(node.attr_dtype_or("dtype", DType::I32)?);
    Ok(OpSignature::new(vec![t, t, ValueType::Tensor(DType::I32)], vec![out]))
}

struct Histogram {
    dtype: DType,
    wide: bool,
}

fn build_histogram(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = real_dtype(init.node)?;
    let out = init.node.attr_dtype_or("dtype", DType::I32)?;
    if !matches!(out, DType::I32 | DType::I64) {
        bail!(invalid_argument, "HistogramFixedWidth counts in int32 or int64, not {out}");
    }
    Ok(Box::new(Histogram { dtype, wide: out == DType::I64 }))
}

impl OpKernel for Histogram {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (values, range, nbins) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        if range.dims() != [2] {
            bail!(invalid_argument, "value_range should be a vector of 2 elements, got shape {}", range.shape());
        }
        if nbins.rank() != 0 {
            bail!(invalid_argument, "nbins should be a scalar, got shape {}", nbins.shape());
        }
        let nbins = nbins.scalar_value::<i32>()?;
        if nbins <= 0 {
            bail!(invalid_argument, "nbins should be a positive number, but got '{nbins}'");
        }
        let counts = match self.dtype {
            DType::F32 => histogram::<f32>(values, range, nbins as usize)?,
            DType::F64 => histogram::<f64>(values, range, nbins as usize)?,
            DType::I32 => histogram::<i32>(values, range, nbins as usize)?,
            DType::I64 => histogram::<i64>(values, range, nbins as usize)?,
            other => unreachable!("{other} was refused when the kernel was built"),
        };
        let out = if self.wide {
            Tensor::from_map([counts.len()], &counts, |c| c as i64)?
        } else {
            Tensor::from_map([counts.len()], &counts, |c| c as i32)?
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

fn histogram<T: Num + std::fmt::Display>(values: &Tensor, range: &Tensor, nbins: usize) -> Result<Vec<u64>> {
    let (lo, hi) = {
        let r = range.as_slice::<T>()?;
        (r[0], r[1])
    };
    // NaN bounds fail too.
    if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
        bail!(invalid_argument, "value_range should satisfy value_range[0] < value_range[1], but got '[{lo}, {hi}]'");
    }
    let values = values.as_slice::<T>()?;
    if values.iter().any(|v| v.is_nan()) {
        bail!(invalid_argument, "Histogram values must not contain NaN");
    }
    let step = hi.sub(lo).to_f64() / nbins as f64;
    let last = (nbins - 1) as f64;
    let mut counts = vec![0u64; nbins];
    for &v in values {
        let clamped = if v < lo { lo } else { v };
        let bin = (clamped.sub(lo).to_f64() / step).min(last);
        counts[bin as usize] += 1;
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};

    fn ints(v: &[i32]) -> Tensor {
        Tensor::from_slice::<i32>([v.len()], v).unwrap()
    }
    fn floats(dims: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(dims, v).unwrap()
    }
    fn empty() -> Tensor {
        Tensor::from_slice::<f32>([0], &[]).unwrap()
    }
    fn dense(binary: bool) -> NodeSpec {
        node("DenseBincount")
            .attr("T", ty(DType::F32))
            .attr("Tidx", ty(DType::I32))
            .attr("binary_output", AttrValue::Bool(binary))
    }
    fn out(t: Tensor) -> (Vec<usize>, Vec<f32>) {
        (t.dims().to_vec(), t.as_slice::<f32>().unwrap().to_vec())
    }

    #[test]
    fn bincounts_match_tensorflow() {
        // TensorFlow 2.21's outputs for the same calls.
        let b = node("Bincount").attr("T", ty(DType::F32));
        let w = floats(&[4], &[0.5, 1.0, 2.0, 3.0]);
        assert_eq!(out(run1(&b, &[ints(&[1, 2, 2, 3]), Tensor::scalar(4i32), w]).unwrap()).1, [0.0, 0.5, 3.0, 3.0]);
        assert_eq!(
            out(run1(&dense(false), &[ints(&[1, 2, 2, 7]), Tensor::scalar(4i32), empty()]).unwrap()).1,
            [0.0, 1.0, 2.0, 0.0]
        );
        let rows = Tensor::from_slice::<i32>([2, 3], &[1, 2, 2, 0, 3, 3]).unwrap();
        let w = floats(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let got = out(run1(&dense(false), &[rows.clone(), Tensor::scalar(4i32), w.clone()]).unwrap());
        assert_eq!(got, (vec![2, 4], vec![0., 1., 5., 0., 4., 0., 0., 11.]));
        let got = out(run1(&dense(true), &[rows, Tensor::scalar(4i32), w]).unwrap());
        assert_eq!(got, (vec![2, 4], vec![0., 1., 1., 0., 1., 0., 0., 1.]));
        let counted = node("DenseBincount").attr("T", ty(DType::I64)).attr("Tidx", ty(DType::I32));
        let t = run1(&counted, &[ints(&[0, 0, 1]), Tensor::scalar(2i32), Tensor::from_slice::<i64>([0], &[]).unwrap()]);
        assert_eq!(t.unwrap().as_slice::<i64>().unwrap(), [2, 1]);
    }

    #[test]
    fn ragged_bincounts_count_per_ragged_row_as_tensorflow() {
        let node = |binary: bool| {
            NodeSpec::new("b", "RaggedBincount")
                .attr("T", crate::ops::testing::ty(DType::F32))
                .attr("Tidx", crate::ops::testing::ty(DType::I64))
                .attr("binary_output", crate::graph::spec::AttrValue::Bool(binary))
        };
        let i64s = |v: &[i64]| Tensor::from_slice([v.len()], v).unwrap();
        let run = |n: &NodeSpec, inputs: Vec<Tensor>| {
            let inputs = inputs.into_iter().map(crate::ops::Value::Tensor).collect();
            crate::ops::run_kernel_once(n, inputs, &crate::ops::ResourceMgr::default())
                .map(|o| o[0].as_tensor().unwrap().clone())
        };
        // tf.raw_ops.RaggedBincount: rows [1, 5] and [1], size 3.
        let got = run(&node(false), vec![i64s(&[0, 2, 3]), i64s(&[1, 5, 1]), Tensor::scalar(3i64), empty()]).unwrap();
        assert_eq!(out(got), (vec![2, 3], vec![0., 1., 0., 0., 1., 0.]));
        let weights = floats(&[4], &[0.5, 2., 3., 1.]);
        let got =
            run(&node(false), vec![i64s(&[0, 3, 3, 4]), i64s(&[1, 1, 2, 0]), Tensor::scalar(3i64), weights.clone()])
                .unwrap();
        assert_eq!(out(got), (vec![3, 3], vec![0., 2.5, 3., 0., 0., 0., 1., 0., 0.]));
        let got =
            run(&node(true), vec![i64s(&[0, 3, 3, 4]), i64s(&[1, 1, 2, 0]), Tensor::scalar(3i64), weights]).unwrap();
        assert_eq!(out(got), (vec![3, 3], vec![0., 1., 1., 0., 0., 0., 1., 0., 0.]));
        let negative = run(&node(false), vec![i64s(&[0, 2]), i64s(&[1, -1]), Tensor::scalar(3i64), empty()]);
        assert!(negative.unwrap_err().message.contains("non-negative"));
        let splits = run(&node(false), vec![i64s(&[0, 3]), i64s(&[1, 1]), Tensor::scalar(3i64), empty()]);
        assert!(splits.unwrap_err().message.contains("splits"));
    }

    #[test]
    fn bincount_errors_name_the_culprit() {
        let err = |n: &NodeSpec, inputs: &[Tensor]| run1(n, inputs).unwrap_err().message.clone();
        assert_eq!(
            err(&dense(false), &[ints(&[1, -2]), Tensor::scalar(4i32), empty()]),
            "Input arr must be non-negative!"
        );
        assert_eq!(err(&dense(false), &[ints(&[1]), Tensor::scalar(-1i32), empty()]), "size (-1) must be non-negative");
        assert!(
            err(&dense(false), &[ints(&[1, 2]), Tensor::scalar(4i32), floats(&[3], &[1., 2., 3.])])
                .contains("same shape")
        );
        let cube = Tensor::from_slice::<i32>([1, 1, 1], &[0]).unwrap();
        assert!(err(&dense(false), &[cube, Tensor::scalar(4i32), empty()]).contains("at most rank 2"));
    }

    #[test]
    fn histograms_clamp_to_the_range_and_refuse_nan() {
        let h = node("HistogramFixedWidth").attr("T", ty(DType::F32));
        let range = || floats(&[2], &[0.0, 1.0]);
        let values = floats(&[7], &[-1.0, 0.0, 0.5, 1.0, 2.0, f32::INFINITY, f32::NEG_INFINITY]);
        let t = run1(&h, &[values, range(), Tensor::scalar(4i32)]).unwrap();
        assert_eq!(t.as_slice::<i32>().unwrap(), [3, 0, 1, 3]);
        let wide = h.clone().attr("dtype", ty(DType::I64));
        let t = run1(&wide, &[floats(&[2], &[0.3, 0.3]), range(), Tensor::scalar(2i32)]).unwrap();
        assert_eq!(t.as_slice::<i64>().unwrap(), [2, 0]);
        let err = |inputs: &[Tensor]| run1(&h, inputs).unwrap_err().message.clone();
        assert_eq!(
            err(&[floats(&[1], &[f32::NAN]), range(), Tensor::scalar(4i32)]),
            "Histogram values must not contain NaN"
        );
        assert_eq!(
            err(&[floats(&[1], &[0.2]), floats(&[2], &[1.0, 0.0]), Tensor::scalar(4i32)]),
            "value_range should satisfy value_range[0] < value_range[1], but got '[1, 0]'"
        );
        assert_eq!(
            err(&[floats(&[1], &[0.2]), range(), Tensor::scalar(0i32)]),
            "nbins should be a positive number, but got '0'"
        );
    }
}
