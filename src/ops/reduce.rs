//! Reductions: Sum, Mean, Max, Min, Prod, All, Any over a set of axes, and
//! ArgMax/ArgMin along one.
//!
//! Owns: these kernels, axis normalisation (negative axes, duplicates) and
//! the reduction loop. Must not hold state beyond parsed attributes.
//!
//! The loop collapses the input's dimensions into alternating runs of kept
//! and reduced dimensions (size-1 dimensions vanish), then walks the input
//! once in memory order: an odometer over the outer runs and a contiguous
//! inner run that is either folded into one accumulator (inner run reduced)
//! or added elementwise into a row of accumulators (inner run kept).
//!
//! TensorFlow's edge cases: no reduced axis is the identity (the input is
//! forwarded, reshaped, without a copy); reducing an empty dimension gives
//! the reducer's identity (Sum 0, Prod 1, Max −∞ or the integer minimum,
//! Min +∞ or the maximum, All true, Any false, Mean NaN for floats and 0 for
//! integers). float32 sums accumulate in f64; Max and Min propagate NaN.

use super::math::REAL;
use super::numeric::{Float, Num};
use super::registry::OpDef;
use super::{
    KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or, index_values, unsupported_dtype,
};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Element, Shape, Tensor};
use smallvec::SmallVec;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Sum", reduction_signature, build_numeric::<SumR>),
    OpDef::kernel("Mean", reduction_signature, build_numeric::<MeanR>),
    OpDef::kernel("Prod", reduction_signature, build_numeric::<ProdR>),
    OpDef::kernel("Max", reduction_signature, build_numeric::<MaxR>),
    OpDef::kernel("Min", reduction_signature, build_numeric::<MinR>),
    OpDef::kernel("EuclideanNorm", reduction_signature, build_float::<EuclideanR>),
    OpDef::kernel("All", logical_reduction_signature, build_logical::<AllR>),
    OpDef::kernel("Any", logical_reduction_signature, build_logical::<AnyR>),
    OpDef::kernel("ArgMax", arg_signature, build_arg::<false>),
    OpDef::kernel("ArgMin", arg_signature, build_arg::<true>),
];

/// `[T, Tidx] -> [T]`, Tidx defaulting to int32.
fn reduction_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let idx = ValueType::Tensor(attr_index_type_or(node, "Tidx", DType::I32)?);
    Ok(OpSignature::new(vec![t, idx], vec![t]))
}

/// `[bool, Tidx] -> [bool]`.
fn logical_reduction_signature(node: &NodeSpec) -> Result<OpSignature> {
    let b = ValueType::Tensor(DType::Bool);
    let idx = ValueType::Tensor(attr_index_type_or(node, "Tidx", DType::I32)?);
    Ok(OpSignature::new(vec![b, idx], vec![b]))
}

/// `[T, Tidx] -> [output_type]`, output_type defaulting to int64.
fn arg_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let idx = ValueType::Tensor(attr_index_type_or(node, "Tidx", DType::I32)?);
    let out = ValueType::Tensor(attr_index_type_or(node, "output_type", DType::I64)?);
    Ok(OpSignature::new(vec![t, idx], vec![out]))
}

// ---------------------------------------------------------------------------
// Reducers

/// How one reduction folds its elements.
pub trait Reducer<T>: 'static {
    type Acc: Copy;
    fn init() -> Self::Acc;
    fn step(acc: Self::Acc, x: T) -> Self::Acc;
    /// The result from the accumulator of `count` (> 0) elements.
    fn finish(acc: Self::Acc, count: usize) -> T;
    /// The result of reducing no elements.
    fn empty() -> T;
}

pub struct SumR;
impl<T: Num> Reducer<T> for SumR {
    type Acc = T::Acc;
    fn init() -> T::Acc {
        <T::Acc as Num>::ZERO
    }
    #[inline(always)]
    fn step(acc: T::Acc, x: T) -> T::Acc {
        acc.add(x.widen())
    }
    fn finish(acc: T::Acc, _count: usize) -> T {
        T::narrow(acc)
    }
    fn empty() -> T {
        T::ZERO
    }
}

pub struct MeanR;
impl<T: Num> Reducer<T> for MeanR {
    type Acc = T::Acc;
    fn init() -> T::Acc {
        <T::Acc as Num>::ZERO
    }
    #[inline(always)]
    fn step(acc: T::Acc, x: T) -> T::Acc {
        acc.add(x.widen())
    }
    fn finish(acc: T::Acc, count: usize) -> T {
        // Integer means truncate, as TF's sum / count does.
        T::narrow(acc.div(<T::Acc as Num>::from_usize(count)))
    }
    fn empty() -> T {
        if T::IS_FLOAT {
            // 0 / 0: NaN.
            T::ZERO.div(T::ZERO)
        } else {
            T::ZERO
        }
    }
}

pub struct ProdR;
impl<T: Num> Reducer<T> for ProdR {
    type Acc = T::Acc;
    fn init() -> T::Acc {
        <T::Acc as Num>::ONE
    }
    #[inline(always)]
    fn step(acc: T::Acc, x: T) -> T::Acc {
        acc.mul(x.widen())
    }
    fn finish(acc: T::Acc, _count: usize) -> T {
        T::narrow(acc)
    }
    fn empty() -> T {
        T::ONE
    }
}

/// The square root of the sum of squares (`EuclideanNorm`), on floats.
pub struct EuclideanR;
impl<T: Float> Reducer<T> for EuclideanR {
    type Acc = T::Acc;
    fn init() -> T::Acc {
        <T::Acc as Num>::ZERO
    }
    #[inline(always)]
    fn step(acc: T::Acc, x: T) -> T::Acc {
        let x = x.widen();
        acc.add(x.mul(x))
    }
    fn finish(acc: T::Acc, _count: usize) -> T {
        T::narrow(acc).sqrt()
    }
    fn empty() -> T {
        T::ZERO
    }
}

pub struct MaxR;
impl<T: Num> Reducer<T> for MaxR {
    type Acc = T;
    fn init() -> T {
        T::BOTTOM
    }
    #[inline(always)]
    fn step(acc: T, x: T) -> T {
        acc.max_nan(x)
    }
    fn finish(acc: T, _count: usize) -> T {
        acc
    }
    fn empty() -> T {
        T::BOTTOM
    }
}

pub struct MinR;
impl<T: Num> Reducer<T> for MinR {
    type Acc = T;
    fn init() -> T {
        T::TOP
    }
    #[inline(always)]
    fn step(acc: T, x: T) -> T {
        acc.min_nan(x)
    }
    fn finish(acc: T, _count: usize) -> T {
        acc
    }
    fn empty() -> T {
        T::TOP
    }
}

pub struct AllR;
impl Reducer<bool> for AllR {
    type Acc = bool;
    fn init() -> bool {
        true
    }
    #[inline(always)]
    fn step(acc: bool, x: bool) -> bool {
        acc && x
    }
    fn finish(acc: bool, _count: usize) -> bool {
        acc
    }
    fn empty() -> bool {
        true
    }
}

pub struct AnyR;
impl Reducer<bool> for AnyR {
    type Acc = bool;
    fn init() -> bool {
        false
    }
    #[inline(always)]
    fn step(acc: bool, x: bool) -> bool {
        acc || x
    }
    fn finish(acc: bool, _count: usize) -> bool {
        acc
    }
    fn empty() -> bool {
        false
    }
}

// ---------------------------------------------------------------------------
// Axes

/// Which dimensions of a rank-`rank` input `axes` names, with TF's checks:
/// each in `[-rank, rank)`, none twice.
pub fn reduction_mask(axes: &Tensor, rank: usize) -> Result<SmallVec<[bool; 8]>> {
    let mut mask: SmallVec<[bool; 8]> = SmallVec::from_elem(false, rank);
    let r = rank as i64;
    for a in index_values(axes, "reduction_indices")? {
        if a < -r || a >= r {
            bail!(invalid_argument, "Invalid reduction dimension ({a} for input with {rank} dimension(s)");
        }
        let axis = if a < 0 { a + r } else { a } as usize;
        if mask[axis] {
            bail!(invalid_argument, "Invalid reduction arguments: Axes contains duplicate dimension: {axis}");
        }
        mask[axis] = true;
    }
    Ok(mask)
}

/// The output shape of reducing `dims` over `mask`.
fn reduced_shape(dims: &[usize], mask: &[bool], keep_dims: bool) -> Shape {
    let mut out = Shape::scalar();
    for (&d, &m) in dims.iter().zip(mask) {
        if !m {
            out.push(d);
        } else if keep_dims {
            out.push(1);
        }
    }
    out
}

/// Runs of kept or reduced dimensions, size-1 dimensions dropped:
/// `(size, reduced)`.
fn collapse(dims: &[usize], mask: &[bool]) -> SmallVec<[(usize, bool); 8]> {
    let mut runs: SmallVec<[(usize, bool); 8]> = SmallVec::new();
    for (&d, &m) in dims.iter().zip(mask) {
        if d == 1 {
            continue;
        }
        match runs.last_mut() {
            Some((size, reduced)) if *reduced == m => *size *= d,
            _ => runs.push((d, m)),
        }
    }
    runs
}

/// Reduces `x` (non-empty, laid out as `runs`) into `out` (one element per
/// position of the kept runs, in order).
fn reduce_runs<T: Element, R: Reducer<T>>(x: &[T], runs: &[(usize, bool)], out: &mut [T]) {
    let count: usize = runs.iter().filter(|r| r.1).map(|r| r.0).product();
    let (inner, inner_reduced) = runs[runs.len() - 1];
    // Common shapes first: full reduction, and rows folded along the last
    // run ([kept, reduced]): each output is one contiguous fold.
    if runs.len() <= 2 && inner_reduced {
        for (o, row) in out.iter_mut().zip(x.chunks_exact(inner)) {
            *o = R::finish(row.iter().fold(R::init(), |a, &v| R::step(a, v)), count);
        }
        return;
    }
    // General: accumulators for every output, walked with an odometer over
    // the outer runs. `out_stride` is 0 along reduced runs.
    let outer = &runs[..runs.len() - 1];
    let mut out_strides: SmallVec<[usize; 8]> = SmallVec::from_elem(0, outer.len());
    let mut acc_len = if inner_reduced { 1 } else { inner };
    for (g, &(size, reduced)) in outer.iter().enumerate().rev() {
        if !reduced {
            out_strides[g] = acc_len;
            acc_len *= size;
        }
    }
    let mut acc = vec![R::init(); acc_len];
    let rows = x.len() / inner;
    let mut index: SmallVec<[usize; 8]> = SmallVec::from_elem(0, outer.len());
    let mut out_off = 0usize;
    for (r, row) in x.chunks_exact(inner).enumerate() {
        if inner_reduced {
            acc[out_off] = row.iter().fold(acc[out_off], |a, &v| R::step(a, v));
        } else {
            for (a, &v) in acc[out_off..out_off + inner].iter_mut().zip(row) {
                *a = R::step(*a, v);
            }
        }
        if r + 1 == rows {
            break;
        }
        let mut d = outer.len();
        while d > 0 {
            d -= 1;
            index[d] += 1;
            out_off += out_strides[d];
            if index[d] < outer[d].0 {
                break;
            }
            out_off -= out_strides[d] * outer[d].0;
            index[d] = 0;
        }
    }
    for (o, a) in out.iter_mut().zip(acc) {
        *o = R::finish(a, count);
    }
}

/// Reduces `input` over the axes in `axes` with reducer `R`.
pub fn reduce<T: Element, R: Reducer<T>>(input: &Tensor, axes: &Tensor, keep_dims: bool) -> Result<Tensor> {
    let dims = input.dims();
    let mask = reduction_mask(axes, dims.len())?;
    let out_shape = reduced_shape(dims, &mask, keep_dims);
    let runs = collapse(dims, &mask);
    if input.num_elements() > 0 && !runs.iter().any(|r| r.1) {
        // Nothing of size > 1 is reduced: the values are the input's.
        return input.reshaped(out_shape);
    }
    let x = input.as_slice::<T>()?;
    Tensor::build::<T>(out_shape, |out| {
        if out.is_empty() {
            return;
        }
        if x.is_empty() {
            out.fill(R::empty());
            return;
        }
        reduce_runs::<T, R>(x, &runs, out);
    })
}

// ---------------------------------------------------------------------------
// Kernels

struct ReduceKernel {
    compute: fn(&Tensor, &Tensor, bool) -> Result<Tensor>,
    keep_dims: bool,
}

impl OpKernel for ReduceKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let out = (self.compute)(ctx.input(0)?, ctx.input(1)?, self.keep_dims)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

fn build_numeric<R>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>>
where
    R: Reducer<f32> + Reducer<f64> + Reducer<i32> + Reducer<i64>,
{
    let dtype = init.node.attr_dtype("T")?;
    let keep_dims = init.node.attr_bool_or("keep_dims", false)?;
    let compute: fn(&Tensor, &Tensor, bool) -> Result<Tensor> = match dtype {
        DType::F32 => reduce::<f32, R>,
        DType::F64 => reduce::<f64, R>,
        DType::I32 => reduce::<i32, R>,
        DType::I64 => reduce::<i64, R>,
        _ => {
            return Err(unsupported_dtype(&init.node.op, dtype, REAL));
        }
    };
    Ok(Box::new(ReduceKernel { compute, keep_dims }))
}

fn build_float<R>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>>
where
    R: Reducer<f32> + Reducer<f64>,
{
    let dtype = init.node.attr_dtype("T")?;
    let keep_dims = init.node.attr_bool_or("keep_dims", false)?;
    let compute: fn(&Tensor, &Tensor, bool) -> Result<Tensor> = match dtype {
        DType::F32 => reduce::<f32, R>,
        DType::F64 => reduce::<f64, R>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, super::math::FLOAT)),
    };
    Ok(Box::new(ReduceKernel { compute, keep_dims }))
}

fn build_logical<R: Reducer<bool>>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let keep_dims = init.node.attr_bool_or("keep_dims", false)?;
    Ok(Box::new(ReduceKernel { compute: reduce::<bool, R>, keep_dims }))
}

// ---------------------------------------------------------------------------
// ArgMax / ArgMin

/// The index along `axis` of the first largest (or smallest, with `MIN`)
/// element. NaNs are skipped, as Eigen's sequential arg-reducer skips them
/// (every comparison with NaN is false); a run of only NaNs gives 0.
fn arg_reduce<T: Element, I: Element, const MIN: bool>(
    input: &Tensor,
    axis: &Tensor,
    to_index: fn(usize) -> I,
) -> Result<Tensor> {
    if axis.num_elements() != 1 || axis.rank() > 1 {
        bail!(invalid_argument, "dim must be a scalar, but received tensor of shape: {}", axis.shape());
    }
    let rank = input.rank() as i64;
    let a = index_values(axis, "dimension")?[0];
    if a < -rank || a >= rank {
        bail!(invalid_argument, "Expected dimension in the range [{}, {rank}), but got {a}", -rank);
    }
    let axis = if a < 0 { a + rank } else { a } as usize;
    let dims = input.dims();
    let n = dims[axis];
    if n == 0 {
        bail!(invalid_argument, "Reduction axis {a} is empty in shape {}", input.shape());
    }
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..].iter().product();
    let mut out_shape = Shape::scalar();
    for (i, &d) in dims.iter().enumerate() {
        if i != axis {
            out_shape.push(d);
        }
    }
    let x = input.as_slice::<T>()?;
    let better = |v: T, best: T| if MIN { v < best } else { v > best };
    #[allow(clippy::eq_op)]
    let is_nan = |v: T| v != v;
    Tensor::build::<I>(out_shape, |out| {
        for o in 0..outer {
            let base = o * n * inner;
            for i in 0..inner {
                let mut best_k = 0;
                let mut best: Option<T> = None;
                for k in 0..n {
                    let v = x[base + k * inner + i];
                    if is_nan(v) {
                        continue;
                    }
                    match best {
                        Some(b) if !better(v, b) => {}
                        _ => {
                            best = Some(v);
                            best_k = k;
                        }
                    }
                }
                out[o * inner + i] = to_index(best_k);
            }
        }
    })
}

struct ArgKernel {
    compute: fn(&Tensor, &Tensor) -> Result<Tensor>,
}

impl OpKernel for ArgKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let out = (self.compute)(ctx.input(0)?, ctx.input(1)?)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

fn arg_i32<T: Element, const MIN: bool>(x: &Tensor, axis: &Tensor) -> Result<Tensor> {
    // Dimensions beyond i32::MAX cannot be indexed in int32: TF's output
    // would overflow the same way; wrap rather than panic.
    arg_reduce::<T, i32, MIN>(x, axis, |k| k as i32)
}

fn arg_i64<T: Element, const MIN: bool>(x: &Tensor, axis: &Tensor) -> Result<Tensor> {
    arg_reduce::<T, i64, MIN>(x, axis, |k| k as i64)
}

fn build_arg<const MIN: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let out = attr_index_type_or(init.node, "output_type", DType::I64)?;
    let compute: fn(&Tensor, &Tensor) -> Result<Tensor> = if out == DType::I32 {
        crate::dispatch_dtype!(dtype, T => arg_i32::<T, MIN>)
    } else {
        crate::dispatch_dtype!(dtype, T => arg_i64::<T, MIN>)
    };
    Ok(Box::new(ArgKernel { compute }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(shape, v).unwrap()
    }
    fn axes(v: &[i32]) -> Tensor {
        Tensor::from_slice::<i32>([v.len()], v).unwrap()
    }
    fn op(name: &str, t: DType, keep: bool) -> NodeSpec {
        node(name).attr("T", ty(t)).attr("keep_dims", AttrValue::Bool(keep))
    }
    /// 2x3x4 of 0..24.
    fn cube() -> Tensor {
        f32s(&[2, 3, 4], &(0..24).map(|i| i as f32).collect::<Vec<_>>())
    }

    #[test]
    fn euclidean_norm_is_the_root_of_the_sum_of_squares() {
        let x = f32s(&[2, 2], &[3.0, 4.0, -5.0, 12.0]);
        let rows = run1(&op("EuclideanNorm", DType::F32, false), &[x.clone(), axes(&[1])]).unwrap();
        assert_eq!(rows.as_slice::<f32>().unwrap(), &[5.0, 13.0]);
        let all = run1(&op("EuclideanNorm", DType::F32, true), &[x, axes(&[0, 1])]).unwrap();
        assert_eq!(all.dims(), &[1, 1]);
        assert!((all.as_slice::<f32>().unwrap()[0] - 194f32.sqrt()).abs() < 1e-5);
        let ints = Tensor::from_slice::<i32>([2], &[3, 4]).unwrap();
        assert!(run1(&op("EuclideanNorm", DType::I32, false), &[ints, axes(&[0])]).is_err());
    }

    #[test]
    fn sums_over_axis_sets() {
        let x = cube();
        let run = |ax: &[i32], keep: bool| run1(&op("Sum", DType::F32, keep), &[x.clone(), axes(ax)]).unwrap();
        // numpy: x.sum(axis=...) for x = np.arange(24).reshape(2,3,4)
        let all = run(&[0, 1, 2], false);
        assert!(all.shape().is_scalar());
        assert_eq!(all.as_slice::<f32>().unwrap(), &[276.]);
        let a0 = run(&[0], false);
        assert_eq!(a0.dims(), &[3, 4]);
        assert_eq!(a0.as_slice::<f32>().unwrap(), &[12., 14., 16., 18., 20., 22., 24., 26., 28., 30., 32., 34.]);
        let a1 = run(&[-2], false);
        assert_eq!(a1.dims(), &[2, 4]);
        assert_eq!(a1.as_slice::<f32>().unwrap(), &[12., 15., 18., 21., 48., 51., 54., 57.]);
        let a2 = run(&[2], true);
        assert_eq!(a2.dims(), &[2, 3, 1]);
        assert_eq!(a2.as_slice::<f32>().unwrap(), &[6., 22., 38., 54., 70., 86.]);
        let a02 = run(&[0, -1], true);
        assert_eq!(a02.dims(), &[1, 3, 1]);
        assert_eq!(a02.as_slice::<f32>().unwrap(), &[60., 92., 124.]);
        let a01 = run(&[1, 0], false);
        assert_eq!(a01.as_slice::<f32>().unwrap(), &[60., 66., 72., 78.]);
        // A scalar axis and int64 axes.
        let s = run1(&op("Sum", DType::F32, false), &[x.clone(), Tensor::scalar(1i64)]).unwrap();
        assert_eq!(s.dims(), &[2, 4]);
    }

    #[test]
    fn no_axes_is_the_identity_without_copy() {
        let x = f32s(&[40], &[1.5; 40]);
        let out = run1(&op("Sum", DType::F32, false), &[x.clone(), axes(&[])]).unwrap();
        assert!(out.shares_bytes_with(&x));
        assert_eq!(out.dims(), &[40]);
        // Reducing only size-1 dims changes the shape, not the values.
        let y = f32s(&[1, 40], &[2.0; 40]);
        let out = run1(&op("Max", DType::F32, false), &[y.clone(), axes(&[0])]).unwrap();
        assert_eq!(out.dims(), &[40]);
        assert!(out.shares_bytes_with(&y));
    }

    #[test]
    fn other_reducers() {
        let x = f32s(&[2, 3], &[1., -2., 3., 4., 5., -6.]);
        let run = |name: &str, ax: &[i32]| run1(&op(name, DType::F32, false), &[x.clone(), axes(ax)]).unwrap();
        assert_eq!(run("Mean", &[1]).as_slice::<f32>().unwrap(), &[2. / 3., 1.]);
        assert_eq!(run("Max", &[0]).as_slice::<f32>().unwrap(), &[4., 5., 3.]);
        assert_eq!(run("Min", &[1]).as_slice::<f32>().unwrap(), &[-2., -6.]);
        assert_eq!(run("Prod", &[0, 1]).as_slice::<f32>().unwrap(), &[720.]);
        let xi = Tensor::from_slice::<i32>([2, 2], &[7, 2, -7, -2]).unwrap();
        let mean = run1(&op("Mean", DType::I32, false), &[xi, axes(&[1])]).unwrap();
        assert_eq!(mean.as_slice::<i32>().unwrap(), &[4, -4], "integer mean truncates");
        let nan = f32s(&[3], &[1., f32::NAN, 3.]);
        let mx = run1(&op("Max", DType::F32, false), &[nan.clone(), axes(&[0])]).unwrap();
        assert!(mx.as_slice::<f32>().unwrap()[0].is_nan());
        let mn = run1(&op("Min", DType::F32, false), &[nan, axes(&[0])]).unwrap();
        assert!(mn.as_slice::<f32>().unwrap()[0].is_nan());
        let b = Tensor::from_slice::<bool>([2, 2], &[true, false, true, true]).unwrap();
        let all = run1(&node("All").attr("keep_dims", AttrValue::Bool(false)), &[b.clone(), axes(&[1])]).unwrap();
        assert_eq!(all.as_slice::<bool>().unwrap(), &[false, true]);
        let any = run1(&node("Any"), &[b, axes(&[0])]).unwrap();
        assert_eq!(any.as_slice::<bool>().unwrap(), &[true, true]);
    }

    #[test]
    fn empty_reductions_give_identities() {
        let e = Tensor::zeros(DType::F32, [0, 3]).unwrap();
        let run = |name: &str| run1(&op(name, DType::F32, false), &[e.clone(), axes(&[0])]).unwrap();
        assert_eq!(run("Sum").as_slice::<f32>().unwrap(), &[0.; 3]);
        assert_eq!(run("Prod").as_slice::<f32>().unwrap(), &[1.; 3]);
        assert_eq!(run("Max").as_slice::<f32>().unwrap(), &[f32::NEG_INFINITY; 3]);
        assert_eq!(run("Min").as_slice::<f32>().unwrap(), &[f32::INFINITY; 3]);
        assert!(run("Mean").as_slice::<f32>().unwrap().iter().all(|v| v.is_nan()));
        // Reducing the non-empty axis leaves an empty output.
        let out = run1(&op("Sum", DType::F32, false), &[e.clone(), axes(&[1])]).unwrap();
        assert_eq!(out.dims(), &[0]);
        let ei = Tensor::zeros(DType::I32, [0]).unwrap();
        let mx = run1(&op("Max", DType::I32, false), &[ei.clone(), axes(&[0])]).unwrap();
        assert_eq!(mx.as_slice::<i32>().unwrap(), &[i32::MIN]);
        let mean = run1(&op("Mean", DType::I32, false), &[ei, axes(&[0])]).unwrap();
        assert_eq!(mean.as_slice::<i32>().unwrap(), &[0]);
        let eb = Tensor::zeros(DType::Bool, [0]).unwrap();
        let all = run1(&node("All"), &[eb.clone(), axes(&[0])]).unwrap();
        assert_eq!(all.as_slice::<bool>().unwrap(), &[true]);
        let any = run1(&node("Any"), &[eb, axes(&[0])]).unwrap();
        assert_eq!(any.as_slice::<bool>().unwrap(), &[false]);
    }

    #[test]
    fn axis_errors() {
        let x = cube();
        let err = run1(&op("Sum", DType::F32, false), &[x.clone(), axes(&[3])]).unwrap_err();
        assert_eq!(err.message, "Invalid reduction dimension (3 for input with 3 dimension(s)");
        let err = run1(&op("Sum", DType::F32, false), &[x.clone(), axes(&[1, -2])]).unwrap_err();
        assert_eq!(err.message, "Invalid reduction arguments: Axes contains duplicate dimension: 1");
        let err = run1(&op("Sum", DType::F32, false), &[x, f32s(&[1], &[0.])]).unwrap_err();
        assert!(err.message.contains("int32 or int64"), "{err}");
    }

    #[test]
    fn float32_sums_are_accurate() {
        // 10^6 copies of 0.1f32: naive f32 accumulation drifts by ~1%;
        // numpy (pairwise) gives 100000.0 to 7 digits.
        let x = f32s(&[1_000_000], &vec![0.1; 1_000_000]);
        let s = run1(&op("Sum", DType::F32, false), &[x, axes(&[0])]).unwrap();
        let v = s.as_slice::<f32>().unwrap()[0];
        assert!((v - 100_000.0).abs() < 0.1, "{v}");
    }

    #[test]
    fn arg_max_and_min() {
        let x = f32s(&[2, 3], &[1., 5., 5., 7., f32::NAN, -1.]);
        let am = node("ArgMax").attr("T", ty(DType::F32));
        let out = run1(&am, &[x.clone(), Tensor::scalar(1i32)]).unwrap();
        assert_eq!(out.dtype(), DType::I64);
        assert_eq!(out.as_slice::<i64>().unwrap(), &[1, 0], "ties take the first; NaN skipped");
        let out = run1(&am, &[x.clone(), Tensor::scalar(0i32)]).unwrap();
        assert_eq!(out.as_slice::<i64>().unwrap(), &[1, 0, 0]);
        let amin = node("ArgMin").attr("T", ty(DType::F32)).attr("output_type", ty(DType::I32));
        let out = run1(&amin, &[x.clone(), Tensor::scalar(-1i64)]).unwrap();
        assert_eq!(out.dtype(), DType::I32);
        assert_eq!(out.as_slice::<i32>().unwrap(), &[0, 2]);
        let err = run1(&am, &[x.clone(), Tensor::scalar(2i32)]).unwrap_err();
        assert_eq!(err.message, "Expected dimension in the range [-2, 2), but got 2");
        let e = Tensor::zeros(DType::F32, [2, 0]).unwrap();
        let err = run1(&am, &[e, Tensor::scalar(1i32)]).unwrap_err();
        assert_eq!(err.message, "Reduction axis 1 is empty in shape [2,0]");
        let err = run1(&am, &[x, axes(&[0, 1])]).unwrap_err();
        assert!(err.message.contains("must be a scalar"), "{err}");
    }
}
