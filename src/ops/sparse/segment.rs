//! The segment reductions of sparse embedding lookups
//! (`tf.nn.embedding_lookup_sparse`, `safe_embedding_lookup_sparse`,
//! feature columns' `embedding_column`):
//! - `SparseSegmentSum`, `SparseSegmentMean`, `SparseSegmentSqrtN`:
//!   `output[s] = reduce(data[indices[i]] for i where segment_ids[i] == s)`,
//!   one output row per segment id up to the last (ids sorted, checked);
//!   the `WithNumSegments` forms give `num_segments` rows. Segments no
//!   entry falls in are zero. Mean multiplies a segment's sum by the
//!   reciprocal of its count, SqrtN by that of the count's square root
//!   (TensorFlow's rounding: `5 * (1/3)`, not `5 / 3`).
//! - `SparseSegmentSumGrad`, `SparseSegmentMeanGrad`,
//!   `SparseSegmentSqrtNGrad`: the gradients, `output[indices[i]] +=
//!   grad[segment_ids[i]] * scale(segment)`, `output_dim0` rows; the `V2`
//!   forms give only the rows of the distinct indices, with those indices
//!   sorted.
//!
//! Owns: these kernels and their signatures. Must not hold state.
//!
//! Sums run in TensorFlow's order: the `count % 8` first rows of a
//! segment one after another, then each following block of 8 summed on
//! its own and added, so results match TensorFlow's to the bit where the
//! order of additions matters.

use super::FILL;
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::math::{FLOAT, REAL};
use crate::ops::numeric::{Float, Num};
use crate::ops::registry::OpDef;
use crate::ops::{
    ComputeFn, FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or, index_values,
    unsupported_dtype,
};
use crate::tensor::{DType, Shape, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("SparseSegmentSum", forward_signature::<false>, build_forward::<SumScale, false>),
    OpDef::kernel("SparseSegmentMean", forward_signature::<false>, build_forward::<MeanScale, false>),
    OpDef::kernel("SparseSegmentSqrtN", forward_signature::<false>, build_forward::<SqrtNScale, false>),
    OpDef::kernel("SparseSegmentSumWithNumSegments", forward_signature::<true>, build_forward::<SumScale, true>),
    OpDef::kernel("SparseSegmentMeanWithNumSegments", forward_signature::<true>, build_forward::<MeanScale, true>),
    OpDef::kernel("SparseSegmentSqrtNWithNumSegments", forward_signature::<true>, build_forward::<SqrtNScale, true>),
    OpDef::kernel("SparseSegmentSumGrad", grad_signature::<false>, build_grad::<SumScale, false>),
    OpDef::kernel("SparseSegmentMeanGrad", grad_signature::<false>, build_grad::<MeanScale, false>),
    OpDef::kernel("SparseSegmentSqrtNGrad", grad_signature::<false>, build_grad::<SqrtNScale, false>),
    OpDef::kernel("SparseSegmentSumGradV2", grad_signature::<true>, build_grad::<SumScale, true>),
    OpDef::kernel("SparseSegmentMeanGradV2", grad_signature::<true>, build_grad::<MeanScale, true>),
    OpDef::kernel("SparseSegmentSqrtNGradV2", grad_signature::<true>, build_grad::<SqrtNScale, true>),
];

/// What a reduction does to a segment's sum, given its count: nothing
/// (Sum), divide by it (Mean), by its square root (SqrtN).
pub trait SegmentScale: 'static {
    /// The dtypes the op takes.
    const DTYPES: &'static [DType];
    /// The factor a gradient row is multiplied by.
    fn factor<T: Float>(count: usize) -> T;
    /// A segment's sum of `count` rows, finished in place.
    fn finish<T: Float>(row: &mut [T], count: usize);
}

pub struct SumScale;
impl SegmentScale for SumScale {
    const DTYPES: &'static [DType] = REAL;
    fn factor<T: Float>(_: usize) -> T {
        T::ONE
    }
    fn finish<T: Float>(_: &mut [T], _: usize) {}
}

pub struct MeanScale;
impl SegmentScale for MeanScale {
    const DTYPES: &'static [DType] = FLOAT;
    fn factor<T: Float>(count: usize) -> T {
        T::ONE.div(T::from_usize(count.max(1)))
    }
    fn finish<T: Float>(row: &mut [T], count: usize) {
        if count > 1 {
            let factor = Self::factor::<T>(count);
            row.iter_mut().for_each(|x| *x = x.mul(factor));
        }
    }
}

pub struct SqrtNScale;
impl SegmentScale for SqrtNScale {
    const DTYPES: &'static [DType] = FLOAT;
    fn factor<T: Float>(count: usize) -> T {
        T::ONE.div(T::from_usize(count.max(1)).sqrt())
    }
    fn finish<T: Float>(row: &mut [T], count: usize) {
        if count > 1 {
            let factor = Self::factor::<T>(count);
            row.iter_mut().for_each(|x| *x = x.mul(factor));
        }
    }
}

// ---------------------------------------------------------------------------
// Forward

/// `[T, Tidx, Tsegmentids(, Tnumsegments)] -> [T]`.
fn forward_signature<const WITH_NUM: bool>(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let idx = ValueType::Tensor(attr_index_type_or(node, "Tidx", DType::I32)?);
    let ids = ValueType::Tensor(attr_index_type_or(node, "Tsegmentids", DType::I32)?);
    let mut inputs = vec![t, idx, ids];
    if WITH_NUM {
        inputs.push(ValueType::Tensor(attr_index_type_or(node, "Tnumsegments", DType::I32)?));
    }
    Ok(OpSignature::new(inputs, vec![t]))
}

fn build_forward<S: SegmentScale, const WITH_NUM: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: ComputeFn = match dtype {
        DType::F32 if S::DTYPES.contains(&dtype) => forward::<S, f32, WITH_NUM>,
        DType::F64 if S::DTYPES.contains(&dtype) => forward::<S, f64, WITH_NUM>,
        DType::I32 if S::DTYPES.contains(&dtype) => forward_int::<i32, WITH_NUM>,
        DType::I64 if S::DTYPES.contains(&dtype) => forward_int::<i64, WITH_NUM>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, S::DTYPES)),
    };
    Ok(FnKernel::boxed(compute))
}

/// The checked operands of a forward reduction.
struct Plan {
    indices: smallvec::SmallVec<[i64; 8]>,
    ids: smallvec::SmallVec<[i64; 8]>,
    rows: usize,
    inner: usize,
    out_dims: Vec<usize>,
}

fn plan<const WITH_NUM: bool>(ctx: &OpContext<'_>) -> Result<Plan> {
    let (data, indices, ids) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    if data.rank() == 0 {
        bail!(invalid_argument, "data must be at least rank 1, got a scalar");
    }
    if indices.rank() != 1 {
        bail!(invalid_argument, "indices should be a vector, got shape {}", indices.shape());
    }
    if ids.rank() != 1 {
        bail!(invalid_argument, "segment_ids should be a vector, got shape {}", ids.shape());
    }
    if indices.num_elements() != ids.num_elements() {
        bail!(
            invalid_argument,
            "segment_ids and indices should have same size: {} vs {}",
            ids.num_elements(),
            indices.num_elements()
        );
    }
    let indices = index_values(indices, "indices")?;
    let ids = index_values(ids, "segment_ids")?;
    let last = ids.last().map_or(0, |&l| l.saturating_add(1));
    let segments = if WITH_NUM {
        let num = ctx.input(3)?;
        if num.rank() != 0 {
            bail!(invalid_argument, "num_segments should be a scalar, not shape {}", num.shape());
        }
        let n = index_values(num, "num_segments")?[0];
        if n < 0 {
            bail!(invalid_argument, "num_segments must be non-negative, got {n}");
        }
        if last > n {
            bail!(invalid_argument, "segment ids must be < num_segments: the last is {} of {n}", last - 1);
        }
        n as usize
    } else {
        last.max(0) as usize
    };
    let rows = data.dims()[0];
    crate::ops::training::segment::check_sorted_ids(&ids)?;
    if let Some(&first) = ids.first()
        && first < 0
    {
        bail!(
            invalid_argument,
            "Segment id {first} out of range [0, {segments}), possibly because 'segment_ids' input is not sorted."
        );
    }
    for (i, &index) in indices.iter().enumerate() {
        if index < 0 || index as usize >= rows {
            bail!(invalid_argument, "Bad: indices[{i}] == {index} out of range [0, {rows})");
        }
    }
    let inner = data.dims()[1..].iter().product();
    let mut out_dims = vec![segments];
    out_dims.extend_from_slice(&data.dims()[1..]);
    Ok(Plan { indices, ids, rows, inner, out_dims })
}

/// Calls `each(segment, entries)` for each run of equal ids, in order.
fn for_each_segment(ids: &[i64], mut each: impl FnMut(usize, std::ops::Range<usize>)) {
    let mut start = 0;
    while start < ids.len() {
        let id = ids[start];
        let end = start + ids[start..].iter().take_while(|&&x| x == id).count();
        each(id as usize, start..end);
        start = end;
    }
}

/// Sums `entries`' rows of `data` into `out` in TensorFlow's order (see
/// the module header).
fn sum_rows<T: Num>(out: &mut [T], data: &[T], inner: usize, rows: &[i64]) {
    let row = |r: i64| &data[r as usize * inner..(r as usize + 1) * inner];
    let head = rows.len() % 8;
    out.fill(T::ZERO);
    for &r in &rows[..head] {
        out.iter_mut().zip(row(r)).for_each(|(o, &x)| *o = o.add(x));
    }
    let mut block = vec![T::ZERO; inner];
    for chunk in rows[head..].chunks_exact(8) {
        block.copy_from_slice(row(chunk[0]));
        for &r in &chunk[1..] {
            block.iter_mut().zip(row(r)).for_each(|(b, &x)| *b = b.add(x));
        }
        out.iter_mut().zip(&block).for_each(|(o, &b)| *o = o.add(b));
    }
}

fn forward<S: SegmentScale, T: Float, const WITH_NUM: bool>(ctx: &mut OpContext<'_>) -> Result<()> {
    let plan = plan::<WITH_NUM>(ctx)?;
    let data = ctx.input(0)?.as_slice::<T>()?;
    debug_assert_eq!(data.len(), plan.rows * plan.inner, "data size");
    let inner = plan.inner;
    let out = Tensor::build::<T>(Shape::from_vec(plan.out_dims), |out| {
        out.fill(T::ZERO);
        for_each_segment(&plan.ids, |segment, entries| {
            let row = &mut out[segment * inner..(segment + 1) * inner];
            sum_rows(row, data, inner, &plan.indices[entries.clone()]);
            S::finish(row, entries.len());
        });
    })?;
    ctx.set_output(0, out);
    Ok(())
}

fn forward_int<T: Num, const WITH_NUM: bool>(ctx: &mut OpContext<'_>) -> Result<()> {
    let plan = plan::<WITH_NUM>(ctx)?;
    let data = ctx.input(0)?.as_slice::<T>()?;
    let inner = plan.inner;
    let out = Tensor::build::<T>(Shape::from_vec(plan.out_dims), |out| {
        out.fill(T::ZERO);
        for_each_segment(&plan.ids, |segment, entries| {
            sum_rows(&mut out[segment * inner..(segment + 1) * inner], data, inner, &plan.indices[entries]);
        });
    })?;
    ctx.set_output(0, out);
    Ok(())
}

// ---------------------------------------------------------------------------
// Gradients

/// `[T, Tidx, Tsegmentids, int32] -> [T]` (V2: `-> [T, Tidx]`).
fn grad_signature<const V2: bool>(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let idx = ValueType::Tensor(attr_index_type_or(node, "Tidx", DType::I32)?);
    let ids = ValueType::Tensor(attr_index_type_or(node, "Tsegmentids", DType::I32)?);
    let outputs = if V2 { vec![t, idx] } else { vec![t] };
    Ok(OpSignature::new(vec![t, idx, ids, ValueType::Tensor(DType::I32)], outputs))
}

fn build_grad<S: SegmentScale, const V2: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: ComputeFn = match dtype {
        DType::F32 => grad::<S, f32, V2>,
        DType::F64 => grad::<S, f64, V2>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, FLOAT)),
    };
    Ok(FnKernel::boxed(compute))
}

fn grad<S: SegmentScale, T: Float, const V2: bool>(ctx: &mut OpContext<'_>) -> Result<()> {
    let (grad, indices_t, ids_t, dim0) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, ctx.input(3)?);
    if grad.rank() == 0 {
        bail!(invalid_argument, "grad must be at least rank 1, got a scalar");
    }
    if indices_t.rank() != 1 || ids_t.rank() != 1 || indices_t.num_elements() != ids_t.num_elements() {
        bail!(
            invalid_argument,
            "indices and segment_ids should be vectors of the same size, got shapes {} and {}",
            indices_t.shape(),
            ids_t.shape()
        );
    }
    if dim0.rank() != 0 {
        bail!(invalid_argument, "output_dim0 should be a scalar, not shape {}", dim0.shape());
    }
    let out_rows = dim0.scalar_value::<i32>()?;
    let Ok(out_rows) = usize::try_from(out_rows) else {
        bail!(invalid_argument, "output_dim0 must be non-negative, got {out_rows}");
    };
    let indices = index_values(indices_t, "indices")?;
    let ids = index_values(ids_t, "segment_ids")?;
    let segments = grad.dims()[0];
    let inner: usize = grad.dims()[1..].iter().product();
    let mut counts = vec![0usize; segments];
    for (i, &id) in ids.iter().enumerate() {
        match usize::try_from(id) {
            Ok(s) if s < segments => counts[s] += 1,
            _ => bail!(
                invalid_argument,
                "Invalid number of segments: segment_ids[{i}] = {id}, but grad has {segments} rows"
            ),
        }
    }
    for &index in indices.iter() {
        if index < 0 || index as usize >= out_rows {
            bail!(invalid_argument, "Index {index} out of range [0, {out_rows}).");
        }
    }
    let grad_dims = grad.dims().to_vec();
    let factors: Vec<T> = counts.iter().map(|&c| S::factor::<T>(c)).collect();
    let grad = grad.as_slice::<T>()?;
    // V2: output row of each index, in sorted order of the distinct ones.
    let (slot_of, distinct) = if V2 {
        let mut sorted: Vec<i64> = indices.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut slot = vec![FILL; out_rows];
        for (k, &index) in sorted.iter().enumerate() {
            slot[index as usize] = k;
        }
        (slot, sorted)
    } else {
        ((0..out_rows).collect(), Vec::new())
    };
    let rows = if V2 { distinct.len() } else { out_rows };
    let mut dims = vec![rows];
    dims.extend_from_slice(&grad_dims[1..]);
    let out = Tensor::build::<T>(Shape::from_vec(dims), |out| {
        out.fill(T::ZERO);
        for (&index, &id) in indices.iter().zip(ids.iter()) {
            let (slot, segment) = (slot_of[index as usize], id as usize);
            let factor = factors[segment];
            let source = &grad[segment * inner..(segment + 1) * inner];
            for (o, &g) in out[slot * inner..(slot + 1) * inner].iter_mut().zip(source) {
                *o = o.add(g.mul(factor));
            }
        }
    })?;
    let idx = match indices_t.dtype() {
        DType::I32 => Tensor::from_map::<i64, i32>([distinct.len()].as_slice(), &distinct, |x| x as i32)?,
        _ => Tensor::from_slice::<i64>([distinct.len()].as_slice(), &distinct)?,
    };
    ctx.set_output(0, out);
    if V2 {
        ctx.set_output(1, idx);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::f32s;
    use crate::ops::testing::run_all;
    use crate::ops::testing::{node, ty};
    use crate::tensor::{DType, Tensor};

    fn op(name: &str) -> crate::graph::spec::NodeSpec {
        node(name).attr("T", ty(DType::F32))
    }
    fn i32s(v: &[i32]) -> Tensor {
        Tensor::from_slice::<i32>([v.len()].as_slice(), v).unwrap()
    }
    fn data() -> Tensor {
        f32s(&[4, 3], &(0..12).map(|x| x as f32).collect::<Vec<_>>())
    }
    fn values(op_name: &str, inputs: &[Tensor]) -> Vec<f32> {
        run_all(&op(op_name), inputs).unwrap()[0].as_slice::<f32>().unwrap().to_vec()
    }
    fn error(op_name: &str, inputs: &[Tensor]) -> String {
        run_all(&op(op_name), inputs).unwrap_err().message.clone()
    }

    #[test]
    fn reductions_match_tensorflow() {
        // TensorFlow 2.21's outputs for the same calls.
        let (idx, ids) = (i32s(&[0, 1, 3]), i32s(&[0, 0, 2]));
        assert_eq!(
            values("SparseSegmentSum", &[data(), idx.clone(), ids.clone()]),
            [3., 5., 7., 0., 0., 0., 9., 10., 11.]
        );
        assert_eq!(
            values("SparseSegmentMean", &[data(), idx.clone(), ids.clone()]),
            [1.5, 2.5, 3.5, 0., 0., 0., 9., 10., 11.]
        );
        let sqrtn = values("SparseSegmentSqrtN", &[data(), idx.clone(), ids.clone()]);
        assert_eq!(sqrtn[..3], [2.1213202, 3.535534, 4.9497476]);
        let three = f32s(&[3, 1], &[1., 1., 3.]);
        assert_eq!(values("SparseSegmentMean", &[three, i32s(&[0, 1, 2]), i32s(&[0, 0, 0])]), [1.6666667]);
        let with_num = run_all(&op("SparseSegmentMeanWithNumSegments"), &[data(), idx, ids, Tensor::scalar(5i32)]);
        let with_num = with_num.unwrap().remove(0);
        assert_eq!(with_num.dims(), [5, 3]);
        assert_eq!(with_num.as_slice::<f32>().unwrap()[6..], [9., 10., 11., 0., 0., 0., 0., 0., 0.]);
        let empty = run_all(&op("SparseSegmentMean"), &[data(), i32s(&[]), i32s(&[])]).unwrap().remove(0);
        assert_eq!(empty.dims(), [0, 3]);
        let ints = node("SparseSegmentSum").attr("T", ty(DType::I32));
        let t = run_all(
            &ints,
            &[Tensor::from_slice::<i32>([2, 2].as_slice(), &[1, 2, 3, 4]).unwrap(), i32s(&[0, 1, 1]), i32s(&[0, 0, 1])],
        );
        assert_eq!(t.unwrap()[0].as_slice::<i32>().unwrap(), [4, 6, 3, 4]);
    }

    #[test]
    fn sums_add_in_tensorflows_order() {
        // 13 rows: the 5 first one by one, then a block of 8 summed alone.
        let rows = [1e8f32, 1., -1e8, 1., 1., 1., 1., 1., 1., 1., 3e7, 1., 1.];
        let idx: Vec<i32> = (0..13).collect();
        let sum = values("SparseSegmentSum", &[f32s(&[13, 1], &rows), i32s(&idx), i32s(&[0; 13])]);
        assert_eq!(sum, [30000006.0]);
    }

    #[test]
    fn bad_ids_and_indices_are_refused_naming_them() {
        let e = error("SparseSegmentSum", &[data(), i32s(&[0, 1, 3]), i32s(&[1, 0, 2])]);
        assert!(e.contains("segment ids are not increasing") && e.contains("segment_ids[1] = 0"), "{e}");
        let e = error("SparseSegmentSum", &[data(), i32s(&[0, 7, 3]), i32s(&[0, 0, 2])]);
        assert!(e.contains("indices[1] == 7 out of range [0, 4)"), "{e}");
        let e = error("SparseSegmentSum", &[data(), i32s(&[0, 1, 3]), i32s(&[-1, 0, 2])]);
        assert!(e.contains("Segment id -1 out of range"), "{e}");
        let e = error("SparseSegmentSum", &[data(), i32s(&[0, 1]), i32s(&[0, 0, 2])]);
        assert!(e.contains("should have same size"), "{e}");
        let e = error(
            "SparseSegmentSumWithNumSegments",
            &[data(), i32s(&[0, 1, 3]), i32s(&[0, 0, 2]), Tensor::scalar(2i32)],
        );
        assert!(e.contains("segment ids must be < num_segments"), "{e}");
        let e = error("SparseSegmentSum", &[Tensor::scalar(1f32), i32s(&[0]), i32s(&[0])]);
        assert!(e.contains("at least rank 1"), "{e}");
        let ints = node("SparseSegmentMean").attr("T", ty(DType::I32));
        let e = crate::ops::registry::lookup("SparseSegmentMean").map(|d| d.implementation);
        assert!(e.is_some());
        let sig = (crate::ops::lookup("SparseSegmentMean").unwrap().signature)(&ints).unwrap();
        let crate::ops::Implementation::Kernel(build) = crate::ops::lookup("SparseSegmentMean").unwrap().implementation
        else {
            panic!("a kernel")
        };
        let refused = build(&crate::ops::KernelInit { node: &ints, signature: &sig });
        assert!(refused.is_err_and(|e| e.message.contains("int32")));
    }

    #[test]
    fn gradients_match_tensorflow() {
        let g = f32s(&[3, 3], &[1., 2., 3., 4., 5., 6., 7., 8., 9.]);
        let mean =
            values("SparseSegmentMeanGrad", &[g.clone(), i32s(&[0, 1, 3]), i32s(&[0, 0, 2]), Tensor::scalar(5i32)]);
        assert_eq!(mean, [0.5, 1., 1.5, 0.5, 1., 1.5, 0., 0., 0., 7., 8., 9., 0., 0., 0.]);
        let sqrtn =
            values("SparseSegmentSqrtNGrad", &[g.clone(), i32s(&[0, 1, 1]), i32s(&[0, 0, 2]), Tensor::scalar(5i32)]);
        // 1/sqrt(2) and 2/sqrt(2) rounded to float32, as TensorFlow's factor.
        let (r, two_r) = (std::f32::consts::FRAC_1_SQRT_2, std::f32::consts::SQRT_2);
        assert_eq!(sqrtn[..6], [r, two_r, 2.1213202, 7.7071066, 9.414213, 11.121321]);
        let sum =
            values("SparseSegmentSumGrad", &[g.clone(), i32s(&[0, 1, 1]), i32s(&[0, 0, 2]), Tensor::scalar(5i32)]);
        assert_eq!(sum[..6], [1., 2., 3., 8., 10., 12.]);
        let v2 = run_all(
            &op("SparseSegmentMeanGradV2"),
            &[g.clone(), i32s(&[3, 1, 1]), i32s(&[0, 0, 2]), Tensor::scalar(5i32)],
        );
        let v2 = v2.unwrap();
        assert_eq!(v2[0].as_slice::<f32>().unwrap(), [7.5, 9., 10.5, 0.5, 1., 1.5]);
        assert_eq!(v2[1].as_slice::<i32>().unwrap(), [1, 3]);
        let e = error("SparseSegmentMeanGrad", &[g.clone(), i32s(&[0, 9, 1]), i32s(&[0, 0, 2]), Tensor::scalar(5i32)]);
        assert!(e.contains("Index 9 out of range [0, 5)"), "{e}");
        let e = error("SparseSegmentMeanGrad", &[g, i32s(&[0, 1, 1]), i32s(&[0, 0, 3]), Tensor::scalar(5i32)]);
        assert!(e.contains("Invalid number of segments") && e.contains("segment_ids[2] = 3"), "{e}");
    }
}
