//! Segment reductions and Unique: how gradients of gathers (embedding
//! lookups) are densified and deduplicated.
//! - `UnsortedSegmentSum`, `UnsortedSegmentMax`, `UnsortedSegmentMin`,
//!   `UnsortedSegmentProd`: `output[ids[i]] op= data[i]` over the rows of
//!   `data` below `ids`' dimensions; negative ids are dropped, as TensorFlow
//!   drops them; empty segments hold the reduction's identity (for Max and
//!   Min, the dtype's lowest and highest finite values, not infinities).
//! - `SegmentSum`, `SegmentMean`, `SegmentProd`, `SegmentMax`,
//!   `SegmentMin`: the same over ids sorted ascending (checked), one output
//!   row per id up to the last; a segment no row falls in holds 0 (1 for
//!   the product).
//! - `Unique`: the distinct elements of a vector in order of first
//!   appearance, and each element's position among them;
//!   `UniqueWithCounts` also how often each occurs.
//!
//! Owns: these kernels and their signatures. Must not hold state.

use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::math::REAL;
use crate::ops::numeric::Num;
use crate::ops::registry::OpDef;
use crate::ops::{
    ComputeFn, FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or, index_values,
    unsupported_dtype,
};
use crate::tensor::{DType, Element, Shape, Tensor};
use foldhash::HashMap;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("UnsortedSegmentSum", segment_signature, build_segment::<SumSeg>),
    OpDef::kernel("UnsortedSegmentMax", segment_signature, build_segment::<MaxSeg>),
    OpDef::kernel("UnsortedSegmentMin", segment_signature, build_segment::<MinSeg>),
    OpDef::kernel("UnsortedSegmentProd", segment_signature, build_segment::<ProdSeg>),
    OpDef::kernel("SegmentSum", sorted_segment_signature, build_sorted_segment::<SumSeg, false>),
    OpDef::kernel("SegmentMean", sorted_segment_signature, build_sorted_segment::<SumSeg, true>),
    OpDef::kernel("SegmentProd", sorted_segment_signature, build_sorted_segment::<ProdSeg, false>),
    OpDef::kernel("SegmentMax", sorted_segment_signature, build_sorted_segment::<MaxSeg, false>),
    OpDef::kernel("SegmentMin", sorted_segment_signature, build_sorted_segment::<MinSeg, false>),
    OpDef::kernel("Unique", unique_signature, build_unique::<false>),
    OpDef::kernel("UniqueWithCounts", unique_signature, build_unique::<true>),
    OpDef::kernel("ListDiff", list_diff_signature, build_list_diff),
];

/// TensorFlow's check of sorted segment ids (the sorted and the sparse
/// segment reductions), naming the first out of order.
pub fn check_sorted_ids(ids: &[i64]) -> Result<()> {
    for (i, pair) in ids.windows(2).enumerate() {
        if pair[1] < pair[0] {
            bail!(
                invalid_argument,
                "segment ids are not increasing: segment_ids[{}] = {} after {}",
                i + 1,
                pair[1],
                pair[0]
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Unsorted segment reductions

/// `[T, Tindices, Tnumsegments] -> [T]`.
fn segment_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let ids = attr_index_type_or(node, "Tindices", DType::I32)?;
    let num = attr_index_type_or(node, "Tnumsegments", DType::I32)?;
    Ok(OpSignature::new(vec![t, ValueType::Tensor(ids), ValueType::Tensor(num)], vec![t]))
}

/// An element type of segment reductions: a number with lowest and highest
/// finite values (TensorFlow's identities of Max and Min).
pub trait SegmentElement: Num {
    const LOWEST: Self;
    const HIGHEST: Self;
}

impl SegmentElement for f32 {
    const LOWEST: Self = f32::MIN;
    const HIGHEST: Self = f32::MAX;
}

impl SegmentElement for f64 {
    const LOWEST: Self = f64::MIN;
    const HIGHEST: Self = f64::MAX;
}

impl SegmentElement for i32 {
    const LOWEST: Self = i32::MIN;
    const HIGHEST: Self = i32::MAX;
}

impl SegmentElement for i64 {
    const LOWEST: Self = i64::MIN;
    const HIGHEST: Self = i64::MAX;
}

/// How a segment reduction starts and folds in an element.
pub trait SegmentReducer: 'static {
    fn identity<T: SegmentElement>() -> T;
    fn fold<T: SegmentElement>(acc: T, x: T) -> T;
    /// What a sorted segment reduction (`SegmentSum`...) gives a segment
    /// no row falls in: 0, whatever the reduction.
    fn sorted_empty<T: SegmentElement>() -> T {
        T::ZERO
    }
}

pub struct SumSeg;
impl SegmentReducer for SumSeg {
    fn identity<T: SegmentElement>() -> T {
        T::ZERO
    }
    fn fold<T: SegmentElement>(acc: T, x: T) -> T {
        acc.add(x)
    }
}

pub struct ProdSeg;
impl SegmentReducer for ProdSeg {
    fn identity<T: SegmentElement>() -> T {
        T::ONE
    }
    fn fold<T: SegmentElement>(acc: T, x: T) -> T {
        acc.mul(x)
    }
    fn sorted_empty<T: SegmentElement>() -> T {
        T::ONE
    }
}

/// `std::max(x, acc)`, as TensorFlow's CPU kernel folds: a NaN element
/// replaces the running value, and a later element replaces a NaN.
pub struct MaxSeg;
impl SegmentReducer for MaxSeg {
    fn identity<T: SegmentElement>() -> T {
        T::LOWEST
    }
    fn fold<T: SegmentElement>(acc: T, x: T) -> T {
        if x < acc { acc } else { x }
    }
}

/// `std::min(x, acc)`, as [`MaxSeg`].
pub struct MinSeg;
impl SegmentReducer for MinSeg {
    fn identity<T: SegmentElement>() -> T {
        T::HIGHEST
    }
    fn fold<T: SegmentElement>(acc: T, x: T) -> T {
        if acc < x { acc } else { x }
    }
}

fn build_segment<R: SegmentReducer>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: ComputeFn = match dtype {
        DType::F32 => segment::<R, f32>,
        DType::F64 => segment::<R, f64>,
        DType::I32 => segment::<R, i32>,
        DType::I64 => segment::<R, i64>,
        _ => {
            return Err(unsupported_dtype(&init.node.op, dtype, REAL));
        }
    };
    Ok(FnKernel::boxed(compute))
}

fn segment<R: SegmentReducer, T: SegmentElement>(ctx: &mut OpContext<'_>) -> Result<()> {
    let (data, ids, num) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    if num.rank() != 0 {
        bail!(invalid_argument, "num_segments should be a scalar, not shape {}", num.shape());
    }
    let num_segments = index_values(num, "num_segments")?[0];
    let Ok(segments) = usize::try_from(num_segments) else {
        bail!(invalid_argument, "Input num_segments == {num_segments} must not be negative.");
    };
    if !data.dims().starts_with(ids.dims()) {
        bail!(
            invalid_argument,
            "data.shape = {} does not start with segment_ids.shape = {}",
            data.shape(),
            ids.shape()
        );
    }
    let row_dims = &data.dims()[ids.rank()..];
    let inner: usize = row_dims.iter().product();
    let mut out_dims = Vec::with_capacity(row_dims.len() + 1);
    out_dims.push(segments);
    out_dims.extend_from_slice(row_dims);
    let ids_values = index_values(ids, "segment_ids")?;
    let data = data.as_slice::<T>()?;
    let mut bad = None;
    let out = Tensor::build::<T>(Shape::from_vec(out_dims), |out| {
        out.fill(R::identity::<T>());
        if inner == 0 {
            return;
        }
        for (i, (&id, row)) in ids_values.iter().zip(data.chunks_exact(inner)).enumerate() {
            // Negative ids mark rows to drop.
            let Ok(segment) = usize::try_from(id) else { continue };
            if segment >= segments {
                bad = Some((i, id));
                return;
            }
            for (o, &x) in out[segment * inner..(segment + 1) * inner].iter_mut().zip(row) {
                *o = R::fold(*o, x);
            }
        }
    })?;
    if let Some((i, id)) = bad {
        bail!(
            invalid_argument,
            "segment_ids{} = {id} is out of range [0, {segments})",
            super::flat_position(ids.shape(), i)
        );
    }
    ctx.set_output(0, out);
    Ok(())
}

// ---------------------------------------------------------------------------
// Sorted segment reductions

/// `[T, Tindices] -> [T]`.
fn sorted_segment_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let ids = attr_index_type_or(node, "Tindices", DType::I32)?;
    Ok(OpSignature::new(vec![t, ValueType::Tensor(ids)], vec![t]))
}

fn build_sorted_segment<R: SegmentReducer, const MEAN: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: ComputeFn = match dtype {
        DType::F32 => sorted_segment::<R, f32, MEAN>,
        DType::F64 => sorted_segment::<R, f64, MEAN>,
        DType::I32 => sorted_segment::<R, i32, MEAN>,
        DType::I64 => sorted_segment::<R, i64, MEAN>,
        _ => {
            return Err(unsupported_dtype(&init.node.op, dtype, REAL));
        }
    };
    Ok(FnKernel::boxed(compute))
}

/// `output[ids[i]] op= data[i]` over the rows of `data`, where `ids` is
/// sorted and the output has `ids[last] + 1` rows (`MEAN`: the sum divided
/// by the rows folded in).
fn sorted_segment<R: SegmentReducer, T: SegmentElement, const MEAN: bool>(ctx: &mut OpContext<'_>) -> Result<()> {
    let (data, ids) = (ctx.input(0)?, ctx.input(1)?);
    if ids.rank() != 1 {
        bail!(invalid_argument, "segment_ids should be a vector, not shape {}", ids.shape());
    }
    let Some((&rows, row_dims)) = data.dims().split_first() else {
        bail!(invalid_argument, "data must be at least a vector, got shape {}", data.shape());
    };
    if ids.num_elements() != rows {
        bail!(
            invalid_argument,
            "segment_ids should be the same size as dimension 0 of input, got {} and {rows}",
            ids.num_elements()
        );
    }
    let ids_values = index_values(ids, "segment_ids")?;
    check_sorted_ids(&ids_values)?;
    if let Some(&first) = ids_values.first().filter(|&&id| id < 0) {
        bail!(invalid_argument, "segment ids must be >= 0, got {first}");
    }
    let segments = ids_values.last().map_or(0, |&last| last as usize + 1);
    let inner: usize = row_dims.iter().product();
    let out_dims: Vec<usize> = std::iter::once(segments).chain(row_dims.iter().copied()).collect();
    let data = data.as_slice::<T>()?;
    let out = Tensor::build::<T>(Shape::from_vec(out_dims), |out| {
        out.fill(R::sorted_empty::<T>());
        if inner == 0 {
            return;
        }
        let mut start = 0;
        while start < rows {
            let id = ids_values[start];
            let end = start + ids_values[start..].iter().take_while(|&&x| x == id).count();
            let segment = &mut out[id as usize * inner..][..inner];
            segment.fill(R::identity::<T>());
            for row in data[start * inner..end * inner].chunks_exact(inner) {
                for (o, &x) in segment.iter_mut().zip(row) {
                    *o = R::fold(*o, x);
                }
            }
            if MEAN {
                let count = T::from_usize(end - start);
                segment.iter_mut().for_each(|o| *o = o.div(count));
            }
            start = end;
        }
    })?;
    ctx.set_output(0, out);
    Ok(())
}

// ---------------------------------------------------------------------------
// Unique

/// `[T] -> [T, out_idx]`.
fn unique_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let idx = ValueType::Tensor(attr_index_type_or(node, "out_idx", DType::I32)?);
    let outputs = if node.op == "UniqueWithCounts" { vec![t, idx, idx] } else { vec![t, idx] };
    Ok(OpSignature::new(vec![t], outputs))
}

/// An element as a hash key with TensorFlow's equality: `-0.0` equals
/// `0.0`, and NaN equals nothing (so every NaN is its own element).
trait UniqueKey: Element {
    fn key(self) -> Option<u64>;
}

impl UniqueKey for f32 {
    fn key(self) -> Option<u64> {
        if self.is_nan() { None } else { Some((self + 0.0).to_bits() as u64) }
    }
}

impl UniqueKey for f64 {
    fn key(self) -> Option<u64> {
        if self.is_nan() { None } else { Some((self + 0.0).to_bits()) }
    }
}

impl UniqueKey for i32 {
    fn key(self) -> Option<u64> {
        Some(self as u32 as u64)
    }
}

impl UniqueKey for i64 {
    fn key(self) -> Option<u64> {
        Some(self as u64)
    }
}

impl UniqueKey for u8 {
    fn key(self) -> Option<u64> {
        Some(self as u64)
    }
}

impl UniqueKey for u64 {
    fn key(self) -> Option<u64> {
        Some(self)
    }
}

impl UniqueKey for bool {
    fn key(self) -> Option<u64> {
        Some(self as u64)
    }
}

/// An output index type.
trait IndexOut: Element {
    fn from_position(p: usize) -> Self;
}

impl IndexOut for i32 {
    fn from_position(p: usize) -> Self {
        p as i32
    }
}

impl IndexOut for i64 {
    fn from_position(p: usize) -> Self {
        p as i64
    }
}

/// The kernel `$kernel` instantiated for `$dtype`'s element type (`T`,
/// one with a [`UniqueKey`]) and the index type `wide` picks (`I`: int64,
/// else int32); any other dtype goes to the `$other` arm.
macro_rules! keyed_kernel {
    ($dtype:expr, $wide:expr, |$t:ident, $i:ident| $kernel:expr, $other:pat => $fallback:expr) => {{
        macro_rules! pick {
            ($elem:ty) => {{
                type $t = $elem;
                if $wide {
                    type $i = i64;
                    $kernel as ComputeFn
                } else {
                    type $i = i32;
                    $kernel as ComputeFn
                }
            }};
        }
        match $dtype {
            DType::F32 => pick!(f32),
            DType::F64 => pick!(f64),
            DType::I32 => pick!(i32),
            DType::I64 => pick!(i64),
            DType::Bool => pick!(bool),
            DType::U8 => pick!(u8),
            DType::U64 => pick!(u64),
            $other => $fallback,
        }
    }};
}

fn build_unique<const COUNTS: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let wide = attr_index_type_or(init.node, "out_idx", DType::I32)? == DType::I64;
    let compute = keyed_kernel!(dtype, wide, |T, I| unique::<T, I, COUNTS>, other => match other {
        DType::String if wide => unique_strings::<i64, COUNTS> as ComputeFn,
        DType::String => unique_strings::<i32, COUNTS> as ComputeFn,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, &DType::NUMERIC)),
    });
    Ok(FnKernel::boxed(compute))
}

fn unique<T: UniqueKey, I: IndexOut, const COUNTS: bool>(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    if x.rank() != 1 {
        bail!(invalid_argument, "unique expects a 1D vector.");
    }
    let values = x.as_slice::<T>()?;
    if I::DTYPE == DType::I32 && values.len() > i32::MAX as usize {
        return Err(Status::invalid_argument("unique: more elements than an int32 index can count"));
    }
    let mut first: HashMap<u64, usize> = HashMap::default();
    let mut distinct: Vec<T> = Vec::new();
    let mut counts: Vec<usize> = Vec::new();
    let idx = Tensor::build::<I>(x.shape().clone(), |idx| {
        for (slot, &v) in idx.iter_mut().zip(values) {
            let position = match v.key() {
                Some(key) => *first.entry(key).or_insert_with(|| {
                    distinct.push(v);
                    distinct.len() - 1
                }),
                None => {
                    distinct.push(v);
                    distinct.len() - 1
                }
            };
            *slot = I::from_position(position);
            if COUNTS {
                count_at(&mut counts, position);
            }
        }
    })?;
    let y = Tensor::from_slice::<T>([distinct.len()], &distinct)?;
    set_unique_outputs::<I, COUNTS>(ctx, y, idx, &counts)
}

/// `[T, T] -> [T, out_idx]`.
fn list_diff_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let idx = ValueType::Tensor(attr_index_type_or(node, "out_idx", DType::I32)?);
    Ok(OpSignature::new(vec![t, t], vec![t, idx]))
}

fn build_list_diff(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let wide = attr_index_type_or(init.node, "out_idx", DType::I32)? == DType::I64;
    let compute = keyed_kernel!(dtype, wide, |T, I| list_diff::<T, I>, _ => {
        return Err(unsupported_dtype(&init.node.op, dtype, &DType::NUMERIC));
    });
    Ok(FnKernel::boxed(compute))
}

/// `ListDiff` (`tf.compat.v1.setdiff1d`, and `tf.norm`'s axes): the
/// elements of `x` not in `y`, in order and with repeats, and their
/// positions in `x`. A NaN is in no set, as in TensorFlow's hash set.
fn list_diff<T: UniqueKey, I: IndexOut>(ctx: &mut OpContext<'_>) -> Result<()> {
    let (x, y) = (ctx.input(0)?, ctx.input(1)?);
    for (t, name) in [(x, "x"), (y, "y")] {
        if t.rank() != 1 {
            bail!(invalid_argument, "{name} should be a 1D vector.  Got: {}", t.shape());
        }
    }
    let excluded: std::collections::HashSet<u64> = y.as_slice::<T>()?.iter().filter_map(|v| v.key()).collect();
    let (mut kept, mut positions) = (Vec::new(), Vec::new());
    for (i, &v) in x.as_slice::<T>()?.iter().enumerate() {
        if !v.key().is_some_and(|k| excluded.contains(&k)) {
            kept.push(v);
            positions.push(I::from_position(i));
        }
    }
    ctx.set_output(0, Tensor::from_slice::<T>([kept.len()], &kept)?);
    ctx.set_output(1, Tensor::from_slice::<I>([positions.len()], &positions)?);
    Ok(())
}

/// One more occurrence of the element at `position` (a new one is last).
fn count_at(counts: &mut Vec<usize>, position: usize) {
    if position == counts.len() {
        counts.push(0);
    }
    counts[position] += 1;
}

/// `Unique`'s outputs: the distinct elements, each input's position among
/// them, and (`UniqueWithCounts`) how often each occurs.
fn set_unique_outputs<I: IndexOut, const COUNTS: bool>(
    ctx: &mut OpContext<'_>,
    y: Tensor,
    idx: Tensor,
    counts: &[usize],
) -> Result<()> {
    ctx.set_output(0, y);
    ctx.set_output(1, idx);
    if COUNTS {
        ctx.set_output(2, Tensor::from_map([counts.len()], counts, I::from_position)?);
    }
    Ok(())
}

/// [`unique`] of strings, equal when their bytes are (a vocabulary built
/// from a batch of tokens).
fn unique_strings<I: IndexOut, const COUNTS: bool>(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    if x.rank() != 1 {
        bail!(invalid_argument, "unique expects a 1D vector.");
    }
    let values = x.strings()?;
    if I::DTYPE == DType::I32 && values.len() > i32::MAX as usize {
        return Err(Status::invalid_argument("unique: more elements than an int32 index can count"));
    }
    let mut first: HashMap<&[u8], usize> = HashMap::default();
    let mut distinct: Vec<&[u8]> = Vec::new();
    let mut counts: Vec<usize> = Vec::new();
    let idx = Tensor::build::<I>(x.shape().clone(), |idx| {
        for (slot, v) in idx.iter_mut().zip(values.iter()) {
            let position = *first.entry(v).or_insert_with(|| {
                distinct.push(v);
                distinct.len() - 1
            });
            *slot = I::from_position(position);
            if COUNTS {
                count_at(&mut counts, position);
            }
        }
    })?;
    let y = Tensor::from_strings([distinct.len()], &distinct)?;
    set_unique_outputs::<I, COUNTS>(ctx, y, idx, &counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{node, ty};
    use crate::ops::{ResourceMgr, Value, run_kernel_once};

    fn seg(op: &str, t: DType, ids: DType) -> NodeSpec {
        node(op).attr("T", ty(t)).attr("Tindices", ty(ids))
    }

    fn run(n: &NodeSpec, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let values = inputs.iter().cloned().map(Value::Tensor).collect();
        run_kernel_once(n, values, &ResourceMgr::default())?.into_iter().map(Value::into_tensor).collect()
    }

    #[test]
    fn sorted_segments_reduce_runs_of_equal_ids() {
        let data = Tensor::from_slice::<f32>([4, 2], &[1., 2., 3., 4., 5., 6., 7., 8.]).unwrap();
        let ids = Tensor::from_slice::<i32>([4], &[0, 0, 2, 2]).unwrap();
        let cases: &[(&str, [f32; 6])] = &[
            ("SegmentSum", [4., 6., 0., 0., 12., 14.]),
            ("SegmentMean", [2., 3., 0., 0., 6., 7.]),
            ("SegmentProd", [3., 8., 1., 1., 35., 48.]),
            ("SegmentMax", [3., 4., 0., 0., 7., 8.]),
            ("SegmentMin", [1., 2., 0., 0., 5., 6.]),
        ];
        for (op, want) in cases {
            let out = run(&seg(op, DType::F32, DType::I32), &[data.clone(), ids.clone()]).unwrap();
            assert_eq!(out[0].dims(), &[3, 2], "{op}");
            assert_eq!(out[0].as_slice::<f32>().unwrap(), want, "{op}");
        }
        let mean = run(
            &seg("SegmentMean", DType::I64, DType::I32),
            &[Tensor::from_slice::<i64>([3], &[1, 2, 7]).unwrap(), Tensor::from_slice::<i32>([3], &[1, 1, 1]).unwrap()],
        )
        .unwrap();
        assert_eq!(mean[0].as_slice::<i64>().unwrap(), &[0, 3], "integer means truncate");
        let unsorted = Tensor::from_slice::<i32>([4], &[0, 2, 1, 2]).unwrap();
        let err = run(&seg("SegmentSum", DType::F32, DType::I32), &[data.clone(), unsorted]).unwrap_err();
        assert!(err.message.contains("not increasing"), "{err}");
        let short = Tensor::from_slice::<i32>([3], &[0, 0, 1]).unwrap();
        let err = run(&seg("SegmentSum", DType::F32, DType::I32), &[data, short]).unwrap_err();
        assert!(err.message.contains("same size as dimension 0"), "{err}");
    }

    fn ids(v: &[i64]) -> Tensor {
        Tensor::from_slice::<i64>([v.len()], v).unwrap()
    }

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(shape, v).unwrap()
    }

    // Expected values: TensorFlow 2.21's UnsortedSegment* kernels.
    #[test]
    fn unsorted_segment_reductions_match_tf() {
        let sum = seg("UnsortedSegmentSum", DType::F32, DType::I64);
        let data = f32s(&[3, 2], &[1., 5., 3., 2., 7., 8.]);
        let out = run(&sum, &[data.clone(), ids(&[2, -1, 2]), Tensor::scalar(3i32)]).unwrap().remove(0);
        assert_eq!(out.dims(), &[3, 2]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[0., 0., 0., 0., 8., 13.], "negative ids are dropped");
        // Ids of rank 0 index the whole of data; int64 num_segments.
        let wide = sum.clone().attr("Tnumsegments", ty(DType::I64));
        let out = run(&wide, &[data.reshaped([1, 3, 2]).unwrap(), Tensor::scalar(1i64), Tensor::scalar(2i64)]).unwrap();
        assert_eq!(out[0].dims(), &[2, 1, 3, 2]);
        assert_eq!(&out[0].as_slice::<f32>().unwrap()[6..], &[1., 5., 3., 2., 7., 8.]);
        let v = f32s(&[4], &[1., 5., 3., 2.]);
        let min = run(
            &seg("UnsortedSegmentMin", DType::F32, DType::I64),
            &[v.clone(), ids(&[0, 0, -1, 1]), Tensor::scalar(3i32)],
        )
        .unwrap();
        assert_eq!(min[0].as_slice::<f32>().unwrap(), &[1., 2., f32::MAX], "empty segments hold the largest finite");
        let prod =
            run(&seg("UnsortedSegmentProd", DType::F32, DType::I64), &[v, ids(&[0, 0, -1, 1]), Tensor::scalar(3i32)])
                .unwrap();
        assert_eq!(prod[0].as_slice::<f32>().unwrap(), &[5., 2., 1.]);
        let ints = seg("UnsortedSegmentMax", DType::I32, DType::I32);
        let out = run(
            &ints,
            &[
                Tensor::from_slice::<i32>([1], &[4]).unwrap(),
                Tensor::from_slice::<i32>([1], &[1]).unwrap(),
                Tensor::scalar(3i32),
            ],
        )
        .unwrap();
        assert_eq!(out[0].as_slice::<i32>().unwrap(), &[i32::MIN, 4, i32::MIN]);
        let isum = seg("UnsortedSegmentSum", DType::I32, DType::I64);
        let out =
            run(&isum, &[Tensor::from_slice::<i32>([3], &[4, 5, 6]).unwrap(), ids(&[1, 1, 0]), Tensor::scalar(2i32)])
                .unwrap();
        assert_eq!(out[0].as_slice::<i32>().unwrap(), &[6, 9]);
    }

    #[test]
    fn segment_max_folds_nan_as_tf() {
        // TF: [1, nan] -> nan, [nan, 1] -> 1; empty -> lowest finite.
        let max = seg("UnsortedSegmentMax", DType::F32, DType::I64);
        let data = f32s(&[5], &[1., f32::NAN, 3., 2., f32::NAN]);
        let out = run(&max, &[data, ids(&[0, 0, 1, 1, 2]), Tensor::scalar(4i32)]).unwrap();
        let got = out[0].as_slice::<f32>().unwrap();
        assert!(got[0].is_nan() && got[2].is_nan());
        assert_eq!((got[1], got[3]), (3.0, f32::MIN));
        let out = run(&max, &[f32s(&[2], &[f32::NAN, 1.]), ids(&[0, 0]), Tensor::scalar(1i32)]).unwrap();
        assert_eq!(out[0].as_slice::<f32>().unwrap(), &[1.0]);
    }

    #[test]
    fn segment_errors_match_tf() {
        let sum = seg("UnsortedSegmentSum", DType::F32, DType::I64);
        let data = f32s(&[2, 2], &[1., 5., 3., 2.]);
        let two_d = Tensor::from_slice::<i64>([2, 2], &[0, 1, 2, 7]).unwrap();
        let err = run(&sum, &[data.clone(), two_d, Tensor::scalar(3i32)]).unwrap_err();
        assert_eq!(err.message, "segment_ids[1,1] = 7 is out of range [0, 3)");
        let err = run(&sum, &[data.clone(), ids(&[0, 1, 2]), Tensor::scalar(3i32)]).unwrap_err();
        assert_eq!(err.message, "data.shape = [2,2] does not start with segment_ids.shape = [3]");
        let err = run(&sum, &[data.clone(), ids(&[0, 1]), Tensor::scalar(-1i32)]).unwrap_err();
        assert_eq!(err.message, "Input num_segments == -1 must not be negative.");
        let err = run(&sum, &[data, ids(&[0, 1]), Tensor::from_slice::<i32>([2], &[3, 3]).unwrap()]).unwrap_err();
        assert_eq!(err.message, "num_segments should be a scalar, not shape [2]");
    }

    // Expected values: TensorFlow 2.21's Unique.
    #[test]
    fn list_diff_keeps_x_s_order_and_repeats() {
        // TensorFlow 2.21: ListDiff([1, 2, 3, 4, 2], [2, 5]) = [1, 3, 4], [0, 2, 3].
        let n = node("ListDiff").attr("T", ty(DType::I64));
        let out = run(&n, &[ids(&[1, 2, 3, 4, 2]), ids(&[2, 5])]).unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), &[1, 3, 4]);
        assert_eq!(out[1].as_slice::<i32>().unwrap(), &[0, 2, 3]);
        let floats = node("ListDiff").attr("T", ty(DType::F32));
        let out = run(&floats, &[f32s(&[4], &[f32::NAN, 1., -0., 1.]), f32s(&[2], &[f32::NAN, 0.])]).unwrap();
        assert!(out[0].as_slice::<f32>().unwrap()[0].is_nan(), "NaN is never excluded");
        assert_eq!(out[1].as_slice::<i32>().unwrap(), &[0, 1, 3]);
        let err = run(&n, &[ids(&[1]), Tensor::from_slice::<i64>([1, 1], &[1]).unwrap()]).unwrap_err();
        assert!(err.message.starts_with("y should be a 1D vector."), "{}", err.message);
    }

    #[test]
    fn unique_matches_tf() {
        let n = node("Unique").attr("T", ty(DType::F32));
        let x = f32s(&[8], &[3., 1., -0., 3., 0., f32::NAN, f32::NAN, 1.]);
        let out = run(&n, &[x]).unwrap();
        let y = out[0].as_slice::<f32>().unwrap();
        assert_eq!(&y[..3], &[3., 1., 0.]);
        assert!(y[2].is_sign_negative(), "the first of -0 and 0 is kept");
        assert!(y.len() == 5 && y[3].is_nan() && y[4].is_nan(), "every NaN is its own element");
        assert_eq!(out[1].as_slice::<i32>().unwrap(), &[0, 1, 2, 0, 2, 3, 4, 1]);
        let wide = node("Unique").attr("T", ty(DType::I64)).attr("out_idx", ty(DType::I64));
        let out = run(&wide, &[ids(&[3, 1, 3])]).unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), &[3, 1]);
        assert_eq!(out[1].as_slice::<i64>().unwrap(), &[0, 1, 0]);
        // TensorFlow 2.21: UniqueWithCounts([1, 2, 1, 3, 3, 3]).
        let counted = node("UniqueWithCounts").attr("T", ty(DType::I64)).attr("out_idx", ty(DType::I64));
        let out = run(&counted, &[ids(&[1, 2, 1, 3, 3, 3])]).unwrap();
        assert_eq!(out[0].as_slice::<i64>().unwrap(), &[1, 2, 3]);
        assert_eq!(out[1].as_slice::<i64>().unwrap(), &[0, 1, 0, 2, 2, 2]);
        assert_eq!(out[2].as_slice::<i64>().unwrap(), &[2, 1, 3]);
        let bools = node("Unique").attr("T", ty(DType::Bool));
        let out = run(&bools, &[Tensor::from_slice::<bool>([3], &[true, false, true]).unwrap()]).unwrap();
        assert_eq!(out[0].as_slice::<bool>().unwrap(), &[true, false]);
        let err = run(&wide, &[Tensor::from_slice::<i64>([1, 3], &[3, 1, 3]).unwrap()]).unwrap_err();
        assert_eq!(err.message, "unique expects a 1D vector.");
        let out = run(&wide, &[ids(&[])]).unwrap();
        assert_eq!((out[0].dims(), out[1].dims()), (&[0][..], &[0][..]));
    }
}
