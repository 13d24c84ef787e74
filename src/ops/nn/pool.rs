//! Pooling: MaxPool, MaxPoolV2 (ksize and strides as int32 inputs) and
//! AvgPool over NHWC inputs, with VALID / SAME padding (and EXPLICIT for
//! MaxPool); MaxPool also across channels (`ksize = [1, 1, 1, k]`).
//! MaxPool runs float32, float64, int32 and int64; AvgPool float32 and
//! float64 (TensorFlow's types among ours).
//!
//! Owns: these kernels. Must not hold state beyond parsed attributes, and
//! must not spawn threads: large poolings are split by output lines over
//! the device's intra-op pool.
//!
//! TensorFlow's semantics, which differ from numpy's:
//! - MaxPool starts each window at the type's lowest finite value and
//!   takes an element only when it is greater, so NaN never wins: a window
//!   of NaNs (or of -inf) gives -FLT_MAX. Across channels the first element
//!   starts the run instead, so a leading NaN stays.
//! - AvgPool divides by the number of elements inside the input, not the
//!   window size: SAME padding adds nothing to either. The sum runs in the
//!   input type in row-major window order, as TensorFlow's does.
//! - Only NHWC runs on CPU; pooling over the batch dimension, AvgPool
//!   across channels, and MaxPool across channels and space at once are
//!   refused, as TensorFlow refuses them.

use super::window::{Axis, Padding, Work, explicit_paddings, nhwc_list, require_nhwc, split_lines};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::math::{FLOAT, REAL, unary_signature};
use crate::ops::numeric::Num;
use crate::ops::registry::OpDef;
use crate::ops::{IntraOpPool, KernelInit, OpContext, OpKernel, OpSignature, ValueType, unsupported_dtype};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("MaxPool", unary_signature, build_max_pool),
    OpDef::kernel("MaxPoolV2", max_pool_v2_signature, build_max_pool_v2),
    OpDef::kernel("AvgPool", unary_signature, build_avg_pool),
];

/// `data_format` values the op definitions accept.
pub(super) const MAX_POOL_FORMATS: &[&str] = &["NHWC", "NCHW", "NCHW_VECT_C"];
pub(super) const AVG_POOL_FORMATS: &[&str] = &["NHWC", "NCHW"];

/// An element type MaxPool runs on, and the value each window starts from.
pub trait PoolNum: Num {
    /// The lowest finite value (Eigen's `NumTraits::lowest`).
    const LOWEST: Self;
}

impl PoolNum for f32 {
    const LOWEST: f32 = f32::MIN;
}
impl PoolNum for f64 {
    const LOWEST: f64 = f64::MIN;
}
impl PoolNum for i32 {
    const LOWEST: i32 = i32::MIN;
}
impl PoolNum for i64 {
    const LOWEST: i64 = i64::MIN;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Max,
    Avg,
}

/// A pooling window, checked as TensorFlow's `PoolParameters` checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Window {
    /// Rows, then columns.
    pub size: [usize; 2],
    pub stride: [usize; 2],
    /// Channels per window when pooling across depth (spatial size 1x1),
    /// else 1.
    pub depth: usize,
    padding: Padding,
    explicit: [[i64; 2]; 2],
}

impl Window {
    pub fn new(
        kind: Kind,
        ksize: [i64; 4],
        strides: [i64; 4],
        padding: Padding,
        explicit: [[i64; 2]; 2],
    ) -> Result<Window> {
        if ksize[0] != 1 || strides[0] != 1 {
            bail!(unimplemented, "Pooling is not yet supported on the batch dimension.");
        }
        if let Some(&k) = ksize.iter().find(|&&k| k <= 0) {
            match kind {
                Kind::Avg => bail!(invalid_argument, "ksize must be a positive int32 value, got:{k}"),
                Kind::Max => {
                    let list: Vec<String> = ksize.iter().map(i64::to_string).collect();
                    bail!(
                        invalid_argument,
                        "Sliding window ksize must be positive. The specified or inferred ksize is: {}",
                        list.join(",")
                    )
                }
            }
        }
        if let Some(&s) = strides.iter().find(|&&s| s <= 0) {
            bail!(invalid_argument, "Stride must be > 0, but got {s}");
        }
        // Positive int64s: usize on every platform this runs on.
        let [_, kh, kw, kd] = ksize.map(|k| k as usize);
        let [_, sh, sw, sd] = strides.map(|s| s as usize);
        if kd != 1 && (kh != 1 || kw != 1) {
            bail!(
                unimplemented,
                "MaxPooling supports exactly one of pooling across depth or pooling across width/height."
            );
        }
        if padding == Padding::Explicit {
            let [[top, bottom], [left, right]] = explicit;
            for (side, pad, window) in
                [("Top", top, kh), ("Bottom", bottom, kh), ("Left", left, kw), ("Right", right, kw)]
            {
                if pad as u64 >= window as u64 {
                    bail!(invalid_argument, "{side} padding {pad} needs to be smaller than the window size {window}");
                }
            }
        }
        if kd > 1 {
            if kind == Kind::Avg {
                bail!(unimplemented, "Non-spatial pooling is not yet supported. Volunteers? :)");
            }
            if padding == Padding::Explicit {
                bail!(unimplemented, "Depthwise max pooling does not support explicit padding.");
            }
            if sd != kd {
                bail!(unimplemented, "Depthwise max pooling requires the depth window to equal the depth stride");
            }
        }
        Ok(Window { size: [kh, kw], stride: [sh, sw], depth: kd, padding, explicit })
    }

    pub fn from_node(node: &NodeSpec, kind: Kind, allowed: &[Padding]) -> Result<Window> {
        let ksize = nhwc_list(node, "ksize", &[], "ksize")?;
        let strides = nhwc_list(node, "strides", &[], "stride")?;
        let padding = Padding::from_node(node, allowed)?;
        let explicit = explicit_paddings(node, padding, false)?;
        Window::new(kind, ksize, strides, padding, explicit)
    }

    /// The row and column geometry over an `h x w` input.
    pub fn axes(&self, h: usize, w: usize) -> Result<(Axis, Axis)> {
        let [[top, bottom], [left, right]] = self.explicit;
        Ok((
            Axis::new(h, self.size[0], self.stride[0], 1, self.padding, [top, bottom])?,
            Axis::new(w, self.size[1], self.stride[1], 1, self.padding, [left, right])?,
        ))
    }
}

type PoolFn = fn(&Window, &Tensor, Option<&dyn IntraOpPool>) -> Result<Tensor>;

struct PoolKernel {
    window: Window,
    compute: PoolFn,
}

impl OpKernel for PoolKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let out = (self.compute)(&self.window, ctx.input(0)?, ctx.intra_op())?;
        ctx.set_output(0, out);
        Ok(())
    }
}

fn max_pool_fn(op: &str, dtype: DType) -> Result<PoolFn> {
    Ok(match dtype {
        DType::F32 => max_pool::<f32>,
        DType::F64 => max_pool::<f64>,
        DType::I32 => max_pool::<i32>,
        DType::I64 => max_pool::<i64>,
        _ => {
            return Err(unsupported_dtype(op, dtype, REAL));
        }
    })
}

fn build_max_pool(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let compute = max_pool_fn(&node.op, node.attr_dtype("T")?)?;
    require_nhwc(node, MAX_POOL_FORMATS, Status::invalid_argument)?;
    let window = Window::from_node(node, Kind::Max, &[Padding::Same, Padding::Valid, Padding::Explicit])?;
    Ok(Box::new(PoolKernel { window, compute }))
}

fn build_avg_pool(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = node.attr_dtype("T")?;
    let compute: PoolFn = match dtype {
        DType::F32 => avg_pool::<f32>,
        DType::F64 => avg_pool::<f64>,
        _ => return Err(unsupported_dtype(&node.op, dtype, FLOAT)),
    };
    require_nhwc(node, AVG_POOL_FORMATS, Status::invalid_argument)?;
    let window = Window::from_node(node, Kind::Avg, &[Padding::Same, Padding::Valid])?;
    Ok(Box::new(PoolKernel { window, compute }))
}

/// `[T, int32, int32] -> [T]`.
fn max_pool_v2_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let i = ValueType::Tensor(DType::I32);
    Ok(OpSignature::new(vec![t, i, i], vec![t]))
}

/// MaxPoolV2: the window arrives with each step.
struct MaxPoolV2Kernel {
    padding: Padding,
    compute: PoolFn,
}

fn build_max_pool_v2(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let compute = max_pool_fn(&node.op, node.attr_dtype("T")?)?;
    require_nhwc(node, MAX_POOL_FORMATS, Status::invalid_argument)?;
    let padding = Padding::from_node(node, &[Padding::Same, Padding::Valid])?;
    Ok(Box::new(MaxPoolV2Kernel { padding, compute }))
}

impl OpKernel for MaxPoolV2Kernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let list = |i: usize, what: &str| -> Result<[i64; 4]> {
            let v = ctx.input(i)?.as_slice::<i32>()?;
            let v: [i32; 4] = v.try_into().map_err(|_| {
                Status::invalid_argument(format!("Sliding window {what} field must specify 4 dimensions"))
            })?;
            Ok(v.map(i64::from))
        };
        let window = Window::new(Kind::Max, list(1, "ksize")?, list(2, "stride")?, self.padding, [[0, 0], [0, 0]])?;
        let out = (self.compute)(&window, ctx.input(0)?, ctx.intra_op())?;
        ctx.set_output(0, out);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Loops

/// How one kind of pooling folds a window, a pixel's channels at a time.
trait Fold<T>: Sync {
    fn start(out: &mut [T]);
    fn add(out: &mut [T], x: &[T]);
    /// `count` in-bounds elements were added (at least one).
    fn finish(out: &mut [T], count: usize);
}

struct MaxFold;
impl<T: PoolNum> Fold<T> for MaxFold {
    #[inline(always)]
    fn start(out: &mut [T]) {
        out.fill(T::LOWEST);
    }
    #[inline(always)]
    fn add(out: &mut [T], x: &[T]) {
        for (o, &v) in out.iter_mut().zip(x) {
            if v > *o {
                *o = v;
            }
        }
    }
    #[inline(always)]
    fn finish(_out: &mut [T], _count: usize) {}
}

struct AvgFold;
impl<T: Num> Fold<T> for AvgFold {
    #[inline(always)]
    fn start(out: &mut [T]) {
        out.fill(T::ZERO);
    }
    #[inline(always)]
    fn add(out: &mut [T], x: &[T]) {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = o.add(v);
        }
    }
    #[inline(always)]
    fn finish(out: &mut [T], count: usize) {
        let count = T::from_usize(count);
        out.iter_mut().for_each(|o| *o = o.div(count));
    }
}

fn input_dims(input: &Tensor) -> Result<[usize; 4]> {
    match *input.dims() {
        [n, h, w, c] => Ok([n, h, w, c]),
        _ => bail!(invalid_argument, "tensor_in must be 4-dimensional: {}", input.shape()),
    }
}

fn max_pool<T: PoolNum>(window: &Window, input: &Tensor, pool: Option<&dyn IntraOpPool>) -> Result<Tensor> {
    if window.depth > 1 {
        return depth_max_pool::<T>(window.depth, input, pool);
    }
    spatial::<T, MaxFold>(window, input, pool)
}

fn avg_pool<T: Num>(window: &Window, input: &Tensor, pool: Option<&dyn IntraOpPool>) -> Result<Tensor> {
    spatial::<T, AvgFold>(window, input, pool)
}

/// Pools every `size` window of every image, each output pixel's channels
/// folded together.
fn spatial<T: Num, F: Fold<T>>(window: &Window, input: &Tensor, pool: Option<&dyn IntraOpPool>) -> Result<Tensor> {
    let [n, h, w, c] = input_dims(input)?;
    let (rows, cols) = window.axes(h, w)?;
    let x = input.as_slice::<T>()?;
    let (row_taps, col_taps) = (rows.all_taps(), cols.all_taps());
    let line_len = cols.output * c;
    let work = Work { per_line: line_len * rows.window * cols.window, min_lines: 1 };
    Tensor::build::<T>([n, rows.output, cols.output, c], |out| {
        split_lines(pool, out, line_len, work, &|lines, block| {
            for (line, out_line) in lines.zip(block.chunks_exact_mut(line_len)) {
                let (image, oy) = (line / rows.output, line % rows.output);
                let image = &x[image * h * w * c..(image + 1) * h * w * c];
                for (ox, out_px) in out_line.chunks_exact_mut(c).enumerate() {
                    F::start(out_px);
                    for ky in row_taps[oy].clone() {
                        let iy = rows.position(oy, ky) as usize;
                        for kx in col_taps[ox].clone() {
                            let ix = cols.position(ox, kx) as usize;
                            F::add(out_px, &image[(iy * w + ix) * c..(iy * w + ix + 1) * c]);
                        }
                    }
                    F::finish(out_px, row_taps[oy].len() * col_taps[ox].len());
                }
            }
        })
    })
}

/// MaxPool across channels: each run of `depth` channels of a pixel to its
/// largest, the first element starting the run.
fn depth_max_pool<T: PoolNum>(depth: usize, input: &Tensor, pool: Option<&dyn IntraOpPool>) -> Result<Tensor> {
    let [n, h, w, c] = input_dims(input)?;
    if c % depth != 0 {
        bail!(unimplemented, "Depthwise max pooling requires the depth window to evenly divide the input depth");
    }
    let x = input.as_slice::<T>()?;
    let line_len = w * (c / depth);
    let work = Work { per_line: w * c, min_lines: 1 };
    Tensor::build::<T>([n, h, w, c / depth], |out| {
        split_lines(pool, out, line_len, work, &|lines, block| {
            let src = &x[lines.start * w * c..lines.end * w * c];
            for (o, run) in block.iter_mut().zip(src.chunks_exact(depth)) {
                *o = run[1..].iter().fold(run[0], |m, &v| if v > m { v } else { m });
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::super::window::testing::{assert_values, ints, pool, pool_node, run_with_pool, tensor, text, xs};
    use super::*;
    use crate::ops::testing::{node, run1, ty};

    fn ramp_input(dtype: DType, dims: &[usize]) -> Tensor {
        tensor(dtype, dims, &xs(dims.iter().product()))
    }

    fn close(got: &Tensor, dims: &[usize], want: &[f64], what: &str) {
        assert_eq!(got.dims(), dims, "{what}: shape");
        let expected = tensor(got.dtype(), dims, want);
        got.all_close(&expected, 1e-6, 1e-7).unwrap_or_else(|e| panic!("{what}: {e}"));
    }

    // Expected values: TensorFlow 2.21's MaxPool and AvgPool on CPU.
    #[test]
    fn max_pool_matches_tensorflow() {
        for dtype in [DType::F32, DType::F64, DType::I32, DType::I64] {
            let x = ramp_input(dtype, &[2, 5, 5, 2]);
            let out = run1(&pool_node("MaxPool", dtype, [3, 3], [2, 2], "SAME"), std::slice::from_ref(&x)).unwrap();
            let want = [
                2., 5., 5., 5., 4., 4., 3., 3., 5., 5., 5., 4., 3., 3., 5., 5., 5., 5., 4., 4., 3., 3., 5., 5., 5., 4.,
                4., 4., 3., 5., 5., 5., 4., 4., 3., 3.,
            ];
            assert_values(&out, &[2, 3, 3, 2], &want, "SAME 3x3 stride 2");
            let out = run1(&pool_node("MaxPool", dtype, [2, 3], [1, 1], "VALID"), std::slice::from_ref(&x)).unwrap();
            let want = [
                5., 5., 5., 5., 5., 4., 5., 5., 5., 5., 5., 5., 3., 5., 5., 5., 5., 5., 3., 3., 5., 5., 5., 5., 4., 4.,
                3., 3., 5., 5., 4., 4., 4., 3., 3., 5., 5., 4., 4., 4., 3., 3., 5., 5., 4., 4., 4., 3.,
            ];
            assert_values(&out, &[2, 4, 3, 2], &want, "VALID 2x3");
            let explicit = pool_node("MaxPool", dtype, [3, 3], [2, 2], "EXPLICIT")
                .attr("explicit_paddings", ints(&[0, 0, 1, 0, 2, 1, 0, 0]));
            let out = run1(&explicit, std::slice::from_ref(&x)).unwrap();
            let want =
                [-1., 2., 5., 5., 5., 4., 3., 3., 5., 5., 5., 5., 4., 4., 4., 4., 5., 5., 5., 4., 5., 4., 3., 5.];
            assert_values(&out, &[2, 2, 3, 2], &want, "EXPLICIT");
            // MaxPoolV2: the same window as inputs.
            let v2 = node("MaxPoolV2").attr("T", ty(dtype)).attr("padding", text("SAME"));
            let list = |v: [i32; 4]| Tensor::from_slice::<i32>([4], &v).unwrap();
            let out = run1(&v2, &[x.clone(), list([1, 3, 3, 1]), list([1, 2, 2, 1])]).unwrap();
            let want = run1(&pool_node("MaxPool", dtype, [3, 3], [2, 2], "SAME"), &[x]).unwrap();
            assert!(out.bit_eq(&want), "MaxPoolV2 {dtype}");
        }
        // int64 beyond f64's exact range is kept exactly.
        let big: Vec<i64> = xs(18).iter().map(|&v| v as i64 * (1 << 40)).collect();
        let x = Tensor::from_slice::<i64>([1, 3, 3, 2], &big).unwrap();
        let out = run1(&pool_node("MaxPool", DType::I64, [2, 2], [2, 2], "SAME"), &[x]).unwrap();
        let want = [4398046511104, 5497558138880, 1099511627776, -3298534883328, 5497558138880, 1099511627776];
        assert_eq!(&out.as_slice::<i64>().unwrap()[..6], &want);
    }

    #[test]
    fn max_pool_ignores_nan_and_starts_at_the_lowest_value() {
        let n = pool_node("MaxPool", DType::F32, [2, 2], [1, 1], "VALID");
        let run = |v: &[f32]| {
            let x = Tensor::from_slice::<f32>([1, 2, 2, 1], v).unwrap();
            run1(&n, &[x]).unwrap().as_slice::<f32>().unwrap()[0]
        };
        // TensorFlow: NaN never beats the running maximum, wherever it is.
        assert_eq!(run(&[1., f32::NAN, 3., 0.]), 3.);
        assert_eq!(run(&[f32::NAN, 1., 3., 4.]), 4.);
        assert_eq!(run(&[f32::NAN; 4]), f32::MIN);
        assert_eq!(run(&[f32::NEG_INFINITY; 4]), f32::MIN);
        let n64 = pool_node("MaxPool", DType::F64, [2, 2], [1, 1], "VALID");
        let x = Tensor::from_slice::<f64>([1, 2, 2, 1], &[f64::NAN; 4]).unwrap();
        assert_eq!(run1(&n64, &[x]).unwrap().as_slice::<f64>().unwrap(), &[f64::MIN]);
    }

    #[test]
    fn max_pool_across_depth() {
        let n = node("MaxPool")
            .attr("T", ty(DType::F32))
            .attr("ksize", ints(&[1, 1, 1, 3]))
            .attr("strides", ints(&[1, 1, 1, 3]))
            .attr("padding", text("VALID"));
        let out = run1(&n, &[ramp_input(DType::F32, &[1, 2, 2, 6])]).unwrap();
        assert_values(&out, &[1, 2, 2, 2], &[2., 5., 4., 3., 5., 4., 3., 2.], "depth 3");
        // The first element starts the run: a leading NaN stays, a later
        // one is passed over (TensorFlow's results).
        let x = Tensor::from_slice::<f32>([1, 1, 1, 6], &[f32::NAN, 1., 5., 1., f32::NAN, 4.]).unwrap();
        let out = run1(&n, &[x]).unwrap();
        let got = out.as_slice::<f32>().unwrap();
        assert!(got[0].is_nan() && got[1] == 4., "{got:?}");
        // Spatial strides are ignored across depth, as in TensorFlow.
        let strided = n.clone().attr("strides", ints(&[1, 2, 2, 3]));
        assert_eq!(run1(&strided, &[ramp_input(DType::F32, &[1, 2, 2, 6])]).unwrap().dims(), &[1, 2, 2, 2]);
        let err = run1(&n, &[ramp_input(DType::F32, &[1, 2, 2, 4])]).unwrap_err();
        assert_eq!(err.message, "Depthwise max pooling requires the depth window to evenly divide the input depth");
    }

    #[test]
    fn avg_pool_divides_by_the_elements_inside() {
        for dtype in [DType::F32, DType::F64] {
            let x = ramp_input(dtype, &[2, 5, 5, 2]);
            let out = run1(&pool_node("AvgPool", dtype, [3, 3], [2, 2], "SAME"), std::slice::from_ref(&x)).unwrap();
            // TensorFlow's float32 results (its sums are exact here).
            let want = [
                -1.5,
                0.0,
                1.1666666269302368,
                0.8333333134651184,
                -0.75,
                0.75,
                -1.0,
                -1.3333333730697632,
                0.4444444477558136,
                0.1111111119389534,
                0.6666666865348816,
                0.3333333432674408,
                -0.5,
                -1.75,
                0.3333333432674408,
                0.0,
                0.25,
                1.75,
                -0.75,
                0.75,
                -0.8333333134651184,
                -1.1666666269302368,
                0.0,
                1.5,
                0.6666666865348816,
                0.3333333432674408,
                -0.3333333432674408,
                -0.6666666865348816,
                -1.3333333730697632,
                0.1666666716337204,
                0.25,
                1.75,
                0.1666666716337204,
                -0.1666666716337204,
                -1.75,
                -0.25,
            ];
            close(&out, &[2, 3, 3, 2], &want, "SAME 3x3 stride 2");
            let out = run1(&pool_node("AvgPool", dtype, [2, 3], [1, 1], "VALID"), &[x]).unwrap();
            let want = [
                0.0,
                -0.3333333432674408,
                1.1666666269302368,
                0.8333333134651184,
                0.5,
                0.1666666716337204,
                0.3333333432674408,
                0.0,
                -0.3333333432674408,
                1.1666666269302368,
                0.8333333134651184,
                0.5,
                -1.1666666269302368,
                0.3333333432674408,
                0.0,
                -0.3333333432674408,
                1.1666666269302368,
                0.8333333134651184,
                -0.8333333134651184,
                -1.1666666269302368,
                0.3333333432674408,
                0.0,
                -0.3333333432674408,
                1.1666666269302368,
                -0.1666666716337204,
                -0.5,
                -0.8333333134651184,
                -1.1666666269302368,
                0.3333333432674408,
                0.0,
                0.1666666716337204,
                -0.1666666716337204,
                -0.5,
                -0.8333333134651184,
                -1.1666666269302368,
                0.3333333432674408,
                0.5,
                0.1666666716337204,
                -0.1666666716337204,
                -0.5,
                -0.8333333134651184,
                -1.1666666269302368,
                0.8333333134651184,
                0.5,
                0.1666666716337204,
                -0.1666666716337204,
                -0.5,
                -0.8333333134651184,
            ];
            close(&out, &[2, 4, 3, 2], &want, "VALID 2x3");
            let even = run1(&pool_node("AvgPool", dtype, [2, 2], [1, 1], "SAME"), &[ramp_input(dtype, &[1, 4, 4, 1])]);
            let want = [-1.25, 0.25, 1.75, 2.5, -0.75, 0.75, -0.5, -2.5, -0.25, 1.25, 0.0, -2.0, 0.0, 1.5, 3.0, 1.0];
            close(&even.unwrap(), &[1, 4, 4, 1], &want, "SAME even window pads after");
        }
        // float64 (inputs: float32 thirds), exactly TensorFlow's bits.
        let v: Vec<f64> = xs(9).iter().map(|&v| (v as f32 / 3.0) as f64).collect();
        let x = Tensor::from_slice::<f64>([1, 3, 3, 1], &v).unwrap();
        let out = run1(&pool_node("AvgPool", DType::F64, [2, 2], [1, 1], "SAME"), &[x]).unwrap();
        let want = [
            0.2500000074505806,
            -0.1666666641831398,
            -0.8333333432674408,
            0.8333333358168602,
            -0.5000000074505806,
            -1.1666666865348816,
            0.6666666865348816,
            -0.6666666865348816,
            -1.3333333730697632,
        ];
        assert_eq!(out.as_slice::<f64>().unwrap(), &want);
        // NaN propagates through the sum.
        let x = Tensor::from_slice::<f32>([1, 2, 2, 1], &[1., f32::NAN, 3., 0.]).unwrap();
        let out = run1(&pool_node("AvgPool", DType::F32, [2, 2], [1, 1], "VALID"), &[x]).unwrap();
        assert!(out.as_slice::<f32>().unwrap()[0].is_nan());
    }

    /// GlobalAveragePooling2D freezes to Mean over axes [1, 2] with
    /// keep_dims: it must agree with a whole-image AvgPool.
    #[test]
    fn spatial_mean_with_keep_dims_is_a_global_average_pool() {
        let x = ramp_input(DType::F32, &[2, 3, 5, 4]);
        let mean = node("Mean").attr("T", ty(DType::F32)).attr("keep_dims", crate::graph::spec::AttrValue::Bool(true));
        let axes = Tensor::from_slice::<i32>([2], &[1, 2]).unwrap();
        let got = run1(&mean, &[x.clone(), axes]).unwrap();
        let avg = run1(&pool_node("AvgPool", DType::F32, [3, 5], [1, 1], "VALID"), &[x]).unwrap();
        assert_eq!(got.dims(), &[2, 1, 1, 4]);
        got.all_close(&avg, 1e-6, 1e-7).unwrap();
        // numpy: x.mean(axis=(1, 2)) of the ramp.
        let want = [
            -0.4,
            0.0,
            0.4,
            0.06666667014360428,
            0.13333334028720856,
            0.5333333611488342,
            -0.5333333611488342,
            -0.13333334028720856,
        ];
        close(&got, &[2, 1, 1, 4], &want, "Mean[1,2]");
    }

    #[test]
    fn threads_split_lines_without_changing_bits() {
        let pool = pool(3);
        let fill: Vec<f64> = (0..2 * 64 * 64 * 32).map(|i| ((i * 37) % 101) as f64 / 7.3 - 6.1).collect();
        let x = tensor(DType::F32, &[2, 64, 64, 32], &fill);
        for op in ["MaxPool", "AvgPool"] {
            let n = pool_node(op, DType::F32, [3, 3], [1, 1], "SAME");
            let before = pool.count();
            let split = run_with_pool(&n, std::slice::from_ref(&x), &pool);
            assert!(pool.count() > before, "{op} not split");
            assert!(split.bit_eq(&run1(&n, std::slice::from_ref(&x)).unwrap()), "{op}");
        }
    }

    #[test]
    fn empty_outputs_and_errors() {
        let f = DType::F32;
        let n = pool_node("MaxPool", f, [2, 2], [1, 1], "VALID");
        assert_eq!(run1(&n, &[Tensor::zeros(f, [0, 4, 4, 2]).unwrap()]).unwrap().dims(), &[0, 3, 3, 2]);
        assert_eq!(run1(&n, &[Tensor::zeros(f, [1, 4, 4, 0]).unwrap()]).unwrap().dims(), &[1, 3, 3, 0]);
        // A window one wider than the input: empty, not an error.
        let wide = pool_node("AvgPool", f, [6, 1], [1, 1], "VALID");
        assert_eq!(run1(&wide, &[ramp_input(f, &[1, 5, 5, 1])]).unwrap().dims(), &[1, 0, 5, 1]);
        let err = run1(&n, &[ramp_input(f, &[5, 5, 1])]).unwrap_err();
        assert_eq!(err.message, "tensor_in must be 4-dimensional: [5,5,1]");
        let build = |n: NodeSpec| run1(&n, &[ramp_input(f, &[1, 5, 5, 4])]).unwrap_err();
        let nchw = build(n.clone().attr("data_format", text("NCHW")));
        assert!(nchw.message.contains("MaxPool on CPU supports only data_format NHWC"), "{nchw}");
        let max = |k: [i64; 4], s: [i64; 4]| {
            node("MaxPool")
                .attr("T", ty(f))
                .attr("ksize", ints(&k))
                .attr("strides", ints(&s))
                .attr("padding", text("VALID"))
        };
        let avg = |k: [i64; 4], s: [i64; 4]| max(k, s).attr("padding", text("SAME")).attr("T", ty(f));
        let avg = |k, s| NodeSpec { op: "AvgPool".into(), ..avg(k, s) };
        let explicit =
            |pads: &[i64]| pool_node("MaxPool", f, [2, 2], [1, 1], "EXPLICIT").attr("explicit_paddings", ints(pads));
        let cases = [
            (
                max([1, 2, 2, 1], [1, 1, 1, 1]).attr("ksize", ints(&[1, 2, 2])),
                "Sliding window ksize field must specify 4 dimensions",
            ),
            (
                max([1, 2, 2, 1], [1, 1, 1, 1]).attr("strides", ints(&[1, 2, 2])),
                "Sliding window stride field must specify 4 dimensions",
            ),
            (max([2, 2, 2, 1], [1, 1, 1, 1]), "Pooling is not yet supported on the batch dimension."),
            (max([1, 2, 2, 1], [2, 1, 1, 1]), "Pooling is not yet supported on the batch dimension."),
            (
                max([1, 0, 3, 1], [1, 2, 2, 1]),
                "Sliding window ksize must be positive. The specified or inferred ksize is: 1,0,3,1",
            ),
            (avg([1, 0, 3, 1], [1, 2, 2, 1]), "ksize must be a positive int32 value, got:0"),
            (max([1, 1, 3, 1], [1, 0, 2, 1]), "Stride must be > 0, but got 0"),
            (
                max([1, 2, 2, 2], [1, 1, 1, 2]),
                "MaxPooling supports exactly one of pooling across depth or pooling across width/height.",
            ),
            (
                max([1, 1, 1, 2], [1, 1, 1, 1]),
                "Depthwise max pooling requires the depth window to equal the depth stride",
            ),
            (avg([1, 1, 1, 2], [1, 1, 1, 2]), "Non-spatial pooling is not yet supported. Volunteers? :)"),
            (explicit(&[0, 0, 2, 0, 0, 0, 0, 0]), "Top padding 2 needs to be smaller than the window size 2"),
            (explicit(&[0, 0, 0, 3, 0, 0, 0, 0]), "Bottom padding 3 needs to be smaller than the window size 2"),
            (explicit(&[0, 0, 0, 0, 0, 3, 0, 0]), "Right padding 3 needs to be smaller than the window size 2"),
            (explicit(&[0, 0, 1, 1, 1, 1]), "explicit_paddings attribute must contain 8 values, but got: 6"),
            (
                explicit(&[1, 0, 1, 1, 1, 1, 0, 0]),
                "Nonzero explicit padding in the batch or depth dimensions is not supported",
            ),
            (pool_node("AvgPool", f, [2, 2], [1, 1], "EXPLICIT"), "Value for attr 'padding' of \"EXPLICIT\""),
        ];
        for (node, want) in cases {
            let e = build(node);
            assert!(e.message.contains(want), "{e} does not say {want}");
        }
        // MaxPool takes explicit_paddings alongside SAME, as TensorFlow does.
        let same =
            pool_node("MaxPool", f, [2, 2], [1, 1], "SAME").attr("explicit_paddings", ints(&[0, 0, 1, 1, 1, 1, 0, 0]));
        assert!(run1(&same, &[ramp_input(f, &[1, 3, 3, 1])]).is_ok());
        let v2 = node("MaxPoolV2").attr("T", ty(f)).attr("padding", text("VALID"));
        let list = |v: &[i32]| Tensor::from_slice::<i32>([v.len()], v).unwrap();
        let e = run1(&v2, &[ramp_input(f, &[1, 3, 3, 1]), list(&[1, 2, 2]), list(&[1, 1, 1, 1])]).unwrap_err();
        assert_eq!(e.message, "Sliding window ksize field must specify 4 dimensions");
        let e = run1(&v2, &[ramp_input(f, &[1, 3, 3, 1]), list(&[2, 2, 2, 1]), list(&[1, 1, 1, 1])]).unwrap_err();
        assert_eq!(e.message, "Pooling is not yet supported on the batch dimension.");
        assert!(run1(&pool_node("MaxPool", DType::Bool, [1, 1], [1, 1], "VALID"), &[]).is_err());
        for dtype in [DType::I32, DType::I64] {
            let e = run1(&pool_node("AvgPool", dtype, [1, 1], [1, 1], "VALID"), &[]).unwrap_err();
            assert!(e.message.contains("AvgPool does not support dtype"), "{e}");
        }
    }
}
