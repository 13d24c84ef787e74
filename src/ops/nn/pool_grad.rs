//! Gradients of pooling: `MaxPoolGrad`, `MaxPoolGradV2` (ksize and strides
//! as int32 inputs) and `AvgPoolGrad`, NHWC, with the forward ops' window
//! geometry (`super::pool::Window`). MaxPoolGrad runs float32, float64,
//! int32 and int64; AvgPoolGrad float32 and float64.
//!
//! Owns: these kernels. Must not hold state beyond parsed attributes, and
//! must not spawn threads: large gradients are split by image over the
//! device's intra-op pool (each image's gradient is its own block).
//!
//! TensorFlow's CPU semantics:
//! - MaxPoolGrad recomputes each window's arg max over `orig_input` (the
//!   `orig_output` values are not read, only its shape checked): the first
//!   in-bounds element of the window in row-major order starts the run and
//!   a later one replaces it only when strictly greater, so ties and NaN
//!   route to the first of them, and a window of NaNs or of -inf to its
//!   first element. Each output's gradient is added to its arg max, in
//!   output order.
//! - AvgPoolGrad spreads each output's gradient times `1 / n` (`n` the
//!   window's elements inside the input, the reciprocal taken in float64
//!   and rounded to `T`) over those elements.
//! - Pooling over the batch or depth dimension is refused, as are layouts
//!   other than NHWC.

use super::pool::{AVG_POOL_FORMATS, Kind, MAX_POOL_FORMATS, PoolNum, Window};
use super::window::{Axis, Padding, Work, explicit_paddings, nhwc_list, require_nhwc, split_lines};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::math::{FLOAT, REAL};
use crate::ops::numeric::Float;
use crate::ops::registry::OpDef;
use crate::ops::{
    IntraOpPool, KernelInit, OpContext, OpKernel, OpSignature, ValueType, index_values, unsupported_dtype,
};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("MaxPoolGrad", max_pool_grad_signature::<false>, build_max_pool_grad),
    OpDef::kernel("MaxPoolGradV2", max_pool_grad_signature::<true>, build_max_pool_grad_v2),
    OpDef::kernel("AvgPoolGrad", avg_pool_grad_signature, build_avg_pool_grad),
];

/// `[T, T, T] -> [T]`, with `[int32, int32]` (ksize, strides) after for V2.
fn max_pool_grad_signature<const V2: bool>(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype_or("T", DType::F32)?);
    let mut inputs = vec![t, t, t];
    if V2 {
        inputs.extend([ValueType::Tensor(DType::I32); 2]);
    }
    Ok(OpSignature::new(inputs, vec![t]))
}

/// `[int32 orig_input_shape, T grad] -> [T]`.
fn avg_pool_grad_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![ValueType::Tensor(DType::I32), t], vec![t]))
}

/// The window of a gradient op, refusing depth pooling (which the forward
/// MaxPool has) with TensorFlow's message for `op`.
fn grad_window(
    kind: Kind,
    ksize: [i64; 4],
    strides: [i64; 4],
    padding: Padding,
    explicit: [[i64; 2]; 2],
) -> Result<Window> {
    if ksize[0] != 1 || strides[0] != 1 {
        bail!(unimplemented, "Pooling is not yet supported on the batch dimension.");
    }
    if ksize[3] != 1 || strides[3] != 1 {
        match kind {
            Kind::Max => bail!(unimplemented, "MaxPoolingGrad is not yet supported on the depth dimension."),
            Kind::Avg => bail!(unimplemented, "Non-spatial pooling is not yet supported. Volunteers? :)"),
        }
    }
    Window::new(kind, ksize, strides, padding, explicit)
}

fn window_from_node(node: &NodeSpec, kind: Kind, allowed: &[Padding]) -> Result<Window> {
    let ksize = nhwc_list(node, "ksize", &[], "ksize")?;
    let strides = nhwc_list(node, "strides", &[], "stride")?;
    let padding = Padding::from_node(node, allowed)?;
    grad_window(kind, ksize, strides, padding, explicit_paddings(node, padding, false)?)
}

fn dims4(t: &Tensor, what: &str) -> Result<[usize; 4]> {
    match *t.dims() {
        [n, h, w, c] => Ok([n, h, w, c]),
        _ => bail!(invalid_argument, "{what} must be 4-dimensional: {}", t.shape()),
    }
}

/// The forward pooling of an `input`-shaped tensor, with the gradient's
/// shape checked against its output.
fn geometry(window: &Window, input: [usize; 4], grad: &Tensor, what: &str) -> Result<(Axis, Axis)> {
    let [n, h, w, c] = input;
    let (rows, cols) = window.axes(h, w)?;
    let want = [n, rows.output, cols.output, c];
    if grad.dims() != want {
        bail!(
            invalid_argument,
            "{what} has shape {}, but pooling the input of shape {input:?} gives {want:?}",
            grad.shape()
        );
    }
    Ok((rows, cols))
}

// ---------------------------------------------------------------------------
// MaxPoolGrad

type MaxGradFn = fn(&Window, &Tensor, &Tensor, &Tensor, Option<&dyn IntraOpPool>) -> Result<Tensor>;

fn max_grad_fn(op: &str, dtype: DType) -> Result<MaxGradFn> {
    Ok(match dtype {
        DType::F32 => max_pool_grad::<f32>,
        DType::F64 => max_pool_grad::<f64>,
        DType::I32 => max_pool_grad::<i32>,
        DType::I64 => max_pool_grad::<i64>,
        _ => {
            return Err(unsupported_dtype(op, dtype, REAL));
        }
    })
}

struct MaxPoolGradKernel {
    window: Window,
    compute: MaxGradFn,
}

fn build_max_pool_grad(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let compute = max_grad_fn(&node.op, node.attr_dtype_or("T", DType::F32)?)?;
    require_nhwc(node, MAX_POOL_FORMATS, Status::invalid_argument)?;
    let window = window_from_node(node, Kind::Max, &[Padding::Same, Padding::Valid, Padding::Explicit])?;
    Ok(Box::new(MaxPoolGradKernel { window, compute }))
}

impl OpKernel for MaxPoolGradKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let out = (self.compute)(&self.window, ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, ctx.intra_op())?;
        ctx.set_output(0, out);
        Ok(())
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

/// MaxPoolGradV2: the window arrives with each step.
struct MaxPoolGradV2Kernel {
    padding: Padding,
    compute: MaxGradFn,
}

fn build_max_pool_grad_v2(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let compute = max_grad_fn(&node.op, node.attr_dtype_or("T", DType::F32)?)?;
    require_nhwc(node, MAX_POOL_FORMATS, Status::invalid_argument)?;
    let padding = Padding::from_node(node, &[Padding::Same, Padding::Valid])?;
    Ok(Box::new(MaxPoolGradV2Kernel { padding, compute }))
}

impl OpKernel for MaxPoolGradV2Kernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let list = |i: usize, what: &str| -> Result<[i64; 4]> {
            let v = index_values(ctx.input(i)?, what)?;
            <[i64; 4]>::try_from(v.as_slice())
                .map_err(|_| Status::invalid_argument(format!("Sliding window {what} field must specify 4 dimensions")))
        };
        let window = grad_window(Kind::Max, list(3, "ksize")?, list(4, "stride")?, self.padding, [[0, 0], [0, 0]])?;
        let out = (self.compute)(&window, ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, ctx.intra_op())?;
        ctx.set_output(0, out);
        Ok(())
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

fn max_pool_grad<T: PoolNum>(
    window: &Window,
    orig_input: &Tensor,
    orig_output: &Tensor,
    grad: &Tensor,
    pool: Option<&dyn IntraOpPool>,
) -> Result<Tensor> {
    let input = dims4(orig_input, "tensor_in")?;
    dims4(orig_output, "tensor_out")?;
    dims4(grad, "out_backprop")?;
    let (rows, cols) = geometry(window, input, grad, "out_backprop")?;
    if orig_output.dims() != grad.dims() {
        bail!(
            invalid_argument,
            "tensor_out has shape {} but out_backprop has shape {}",
            orig_output.shape(),
            grad.shape()
        );
    }
    let [_, h, w, c] = input;
    let (x, dy) = (orig_input.as_slice::<T>()?, grad.as_slice::<T>()?);
    let (row_taps, col_taps) = (rows.all_taps(), cols.all_taps());
    let (image_len, out_image_len) = (h * w * c, rows.output * cols.output * c);
    let work = Work { per_line: out_image_len * rows.window * cols.window, min_lines: 1 };
    // Zeroed: pixels no window picks get no gradient.
    Tensor::build::<T>(input, |dx| {
        split_lines(pool, dx, image_len, work, &|images, block| {
            // Per output pixel: each channel's best value and its pixel.
            let mut best = vec![T::ZERO; c];
            let mut at = vec![0usize; c];
            for (image, dx) in images.zip(block.chunks_exact_mut(image_len)) {
                let x = &x[image * image_len..(image + 1) * image_len];
                let dy = &dy[image * out_image_len..(image + 1) * out_image_len];
                for (pixel, dy) in dy.chunks_exact(c).enumerate() {
                    let (oy, ox) = (pixel / cols.output, pixel % cols.output);
                    let (ry, rx) = (row_taps[oy].clone(), col_taps[ox].clone());
                    if ry.is_empty() || rx.is_empty() {
                        continue;
                    }
                    let mut first = true;
                    for ky in ry {
                        let iy = rows.position(oy, ky) as usize;
                        for kx in rx.clone() {
                            let p = iy * w + cols.position(ox, kx) as usize;
                            let px = &x[p * c..(p + 1) * c];
                            if first {
                                best.copy_from_slice(px);
                                at.fill(p);
                                first = false;
                                continue;
                            }
                            for ((b, a), &v) in best.iter_mut().zip(at.iter_mut()).zip(px) {
                                if v > *b {
                                    *b = v;
                                    *a = p;
                                }
                            }
                        }
                    }
                    for (d, (&p, &g)) in at.iter().zip(dy).enumerate() {
                        let slot = &mut dx[p * c + d];
                        *slot = slot.add(g);
                    }
                }
            }
        })
    })
}

// ---------------------------------------------------------------------------
// AvgPoolGrad

type AvgGradFn = fn(&Window, [usize; 4], &Tensor, Option<&dyn IntraOpPool>) -> Result<Tensor>;

struct AvgPoolGradKernel {
    window: Window,
    compute: AvgGradFn,
}

fn build_avg_pool_grad(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = node.attr_dtype("T")?;
    let compute: AvgGradFn = match dtype {
        DType::F32 => avg_pool_grad::<f32>,
        DType::F64 => avg_pool_grad::<f64>,
        _ => return Err(unsupported_dtype(&node.op, dtype, FLOAT)),
    };
    require_nhwc(node, AVG_POOL_FORMATS, Status::invalid_argument)?;
    let window = window_from_node(node, Kind::Avg, &[Padding::Same, Padding::Valid])?;
    Ok(Box::new(AvgPoolGradKernel { window, compute }))
}

impl OpKernel for AvgPoolGradKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let shape = ctx.input(0)?;
        let sizes = index_values(shape, "orig_input_shape")?;
        let input = match <[i64; 4]>::try_from(sizes.as_slice()) {
            Ok(v) if shape.rank() == 1 && v.iter().all(|&d| d >= 0) => v.map(|d| d as usize),
            _ => bail!(
                invalid_argument,
                "orig_input_shape must be 1-dimensional and 4 non-negative elements, got {sizes:?}"
            ),
        };
        let out = (self.compute)(&self.window, input, ctx.input(1)?, ctx.intra_op())?;
        ctx.set_output(0, out);
        Ok(())
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

fn avg_pool_grad<T: Float>(
    window: &Window,
    input: [usize; 4],
    grad: &Tensor,
    pool: Option<&dyn IntraOpPool>,
) -> Result<Tensor> {
    dims4(grad, "out_backprop")?;
    let (rows, cols) = geometry(window, input, grad, "out_backprop")?;
    if crate::tensor::Shape::new(&input).checked_num_elements().is_none() {
        bail!(invalid_argument, "orig_input_shape {input:?} overflows");
    }
    let [_, h, w, c] = input;
    let dy = grad.as_slice::<T>()?;
    let (row_taps, col_taps) = (rows.all_taps(), cols.all_taps());
    let (image_len, out_image_len) = (h * w * c, rows.output * cols.output * c);
    let work = Work { per_line: out_image_len * rows.window * cols.window, min_lines: 1 };
    Tensor::build::<T>(input, |dx| {
        split_lines(pool, dx, image_len, work, &|images, block| {
            let mut share = vec![T::ZERO; c];
            for (image, dx) in images.zip(block.chunks_exact_mut(image_len)) {
                let dy = &dy[image * out_image_len..(image + 1) * out_image_len];
                for (pixel, dy) in dy.chunks_exact(c).enumerate() {
                    let (oy, ox) = (pixel / cols.output, pixel % cols.output);
                    let (ry, rx) = (row_taps[oy].clone(), col_taps[ox].clone());
                    let count = ry.len() * rx.len();
                    if count == 0 {
                        continue;
                    }
                    let coefficient = T::from_f64(1.0 / count as f64);
                    for (s, &g) in share.iter_mut().zip(dy) {
                        *s = g.mul(coefficient);
                    }
                    for ky in ry {
                        let iy = rows.position(oy, ky) as usize;
                        for kx in rx.clone() {
                            let p = iy * w + cols.position(ox, kx) as usize;
                            for (d, &s) in dx[p * c..(p + 1) * c].iter_mut().zip(&share) {
                                *d = d.add(s);
                            }
                        }
                    }
                }
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::super::window::testing::{assert_values, fs, ints, pool, pool_node, run_with_pool, tensor, text, xs};
    use super::*;
    use crate::ops::testing::{node, run1, ty};

    /// The test input: `xs` as `[2, 5, 5, 2]`, many ties.
    fn input(dtype: DType) -> Tensor {
        tensor(dtype, &[2, 5, 5, 2], &xs(100))
    }

    /// The gradient fed back: `fs` (`ramp(.., 5, 3, 9, 4)`) of `dims`.
    fn grad_of(dtype: DType, dims: &[usize]) -> Tensor {
        tensor(dtype, dims, &fs(dims.iter().product()))
    }

    fn max_grad(n: &NodeSpec, x: &Tensor, dy: &Tensor) -> Result<Tensor> {
        let forward = NodeSpec { op: "MaxPool".into(), ..n.clone() };
        let y = run1(&forward, std::slice::from_ref(x))?;
        run1(n, &[x.clone(), y, dy.clone()])
    }

    fn shape_of(dims: &[usize]) -> Tensor {
        Tensor::from_slice::<i32>([dims.len()], &dims.iter().map(|&d| d as i32).collect::<Vec<_>>()).unwrap()
    }

    // Expected values: TensorFlow 2.21's MaxPoolGrad on CPU
    // (gen_nn_ops.max_pool_grad with the same ramps).
    #[rustfmt::skip]
    const MAX_SAME_3X3_S2: [f64; 100] = [
        0., 0., 0., 0., 0., 0., 1., 0., 0., 0., 0., 0., -1., 0., 3., 0., 0., -3., 0., 0., 2., 0., 0., 0., 0., -1., 0.,
        0., 0., 0., 0., -1., 0., 0., 0., 0., -1., 0., 0., 0., 0., 0., -4., 0., 0., 0., 0., 5., 0., 0., -1., 0., 0., -4.,
        0., 0., 0., 0., 1., 0., 0., 2., 0., 0., 0., 0., 0., 0., 0., -3., 0., 0., 3., 0., 0., 0., 0., 0., 0., 0., -2., 0.,
        0., 1., 0., 0., 2., 0., 0., 0., 0., 1., 0., 0., -3., 0., 0., 3., 0., 0.,
    ];
    #[rustfmt::skip]
    const MAX_VALID_2X2_S1: [f64; 100] = [
        0., 0., 0., 0., 0., 0., 2., 0., 0., 0., 0., 0., -1., 0., 1., 0., 0., -3., 0., 0., 1., 0., 0., -1., 0., 1., 0.,
        0., -3., 0., 0., 1., 0., 0., -1., 0., 1., 0., 0., -3., 0., 0., 5., 0., 0., -1., 0., 1., 0., 0., -3., 0., 0., 3.,
        0., 0., 0., 0., 0., 0., 0., -1., 0., 0., 0., 0., 0., 4., 0., -4., 0., 0., 0., 0., 0., 0., 0., 0., 4., 0., -4., 0.,
        0., 0., 0., 0., 0., 0., 0., 4., 0., -4., 0., 0., 3., 0., 0., -3., 0., 0.,
    ];
    #[rustfmt::skip]
    const MAX_SAME_2X3_S2X1: [f64; 100] = [
        0., 0., 0., -3., 0., 0., 3., 0., 0., 0., 0., 0., -1., 0., 3., 0., 0., -3., 0., 0., 0., 0., 0., 0., 0., 6., 0.,
        0., 0., 0., 0., 0., 0., 0., 0., 0., -6., 0., 0., 4., 0., 0., 3., -4., 0., -3., 0., -3., 7., 0., -7., 0., 0., 3.,
        0., 0., 0., 0., -1., 0., 0., 3., 0., 0., -2., 0., 0., 0., 0., 0., 0., 0., 3., 0., 0., 0., 0., 0., 0., 0., 3., 0.,
        0., -6., 0., 0., 0., 0., 0., 1., 0., 5., -3., 0., -3., 0., 0., -3., 1., 0.,
    ];
    /// EXPLICIT padding [[1, 0], [1, 1]], 2x2 windows, stride 2.
    #[rustfmt::skip]
    const MAX_EXPLICIT: [f64; 100] = [
        -1., 4., 0., -4., 0., 0., 1., 0., 0., -3., 0., 0., 0., 0., 3., 0., 0., 0., 0., 0., 2., -2., 0., 0., 0., -1., 0.,
        0., 4., 0., 0., 1., 0., 0., 0., 0., -2., 0., 0., 0., -4., 0., -3., 0., 0., 2., 0., 3., 0., 0., -1., 4., 0., -4.,
        0., 0., 0., 0., 1., -3., 0., -2., 0., 0., 0., 0., 0., 0., 0., 0., 2., 0., 3., 0., 0., -1., 0., 0., 4., 0., -4.,
        0., 0., 2., 0., 0., -2., 0., 0., 0., 0., 1., 0., 0., -3., 0., 0., 3., 0., 0.,
    ];

    #[test]
    fn max_pool_grad_routes_to_the_first_maximum_as_tensorflow_does() {
        for dtype in [DType::F32, DType::F64, DType::I32, DType::I64] {
            let x = input(dtype);
            for (ksize, strides, padding, dy_dims, want) in [
                ([3, 3], [2, 2], "SAME", [2, 3, 3, 2], &MAX_SAME_3X3_S2),
                ([2, 2], [1, 1], "VALID", [2, 4, 4, 2], &MAX_VALID_2X2_S1),
                ([2, 3], [2, 1], "SAME", [2, 3, 5, 2], &MAX_SAME_2X3_S2X1),
            ] {
                let n = pool_node("MaxPoolGrad", dtype, ksize, strides, padding);
                let dx = max_grad(&n, &x, &grad_of(dtype, &dy_dims)).unwrap();
                assert_values(&dx, &[2, 5, 5, 2], want, &format!("{dtype} {ksize:?} {strides:?} {padding}"));
            }
            let explicit = pool_node("MaxPoolGrad", dtype, [2, 2], [2, 2], "EXPLICIT")
                .attr("explicit_paddings", ints(&[0, 0, 1, 0, 1, 1, 0, 0]));
            let dx = max_grad(&explicit, &x, &grad_of(dtype, &[2, 3, 3, 2])).unwrap();
            assert_values(&dx, &[2, 5, 5, 2], &MAX_EXPLICIT, &format!("{dtype} EXPLICIT"));
        }
    }

    #[test]
    fn max_pool_grad_with_nan_and_infinities() {
        let n = pool_node("MaxPoolGrad", DType::F32, [2, 2], [1, 1], "VALID");
        let dy = Tensor::from_slice::<f32>([1, 1, 1, 1], &[10.]).unwrap();
        // TensorFlow: a later NaN is passed over, a leading one keeps the
        // gradient, as do a window of NaNs and one of -inf; ties go first.
        for (x, want) in [
            ([1., f32::NAN, 3., 0.], [0., 0., 10., 0.]),
            ([f32::NAN, 1., 3., 4.], [10., 0., 0., 0.]),
            ([f32::NAN; 4], [10., 0., 0., 0.]),
            ([f32::NEG_INFINITY; 4], [10., 0., 0., 0.]),
            ([2., 5., 5., 1.], [0., 10., 0., 0.]),
        ] {
            let x = Tensor::from_slice::<f32>([1, 2, 2, 1], &x).unwrap();
            let dx = max_grad(&n, &x, &dy).unwrap();
            assert_eq!(dx.as_slice::<f32>().unwrap(), &want, "{x:?}");
        }
    }

    #[test]
    fn max_pool_grad_v2_takes_the_window_as_inputs() {
        // TensorFlow: float64, 3x3 SAME stride 2, dy repeated over channels.
        #[rustfmt::skip]
        let want = [
            0., 0., 0., 3., 0., 0., 0., 0., 0., 0., 0., 0., -1., 0., 5., 0., 0., -3., 0., 0., -4., 0., 0., 0., 0., 1.,
            0., 0., 0., 0., 0., -2., 0., 0., 0., 0., -2., 0., 0., 0., 0., 0., 2., 0., 0., 0., 0., 1., 0., 0., -1., 0.,
            0., 4., 0., 0., 0., 0., 0., 0., 0., -5., 0., 0., 4., 0., 0., 0., 0., -3., 0., 0., 1., 0., 0., 0., 0., 0.,
            0., 0., -2., 0., 0., -1., 0., 0., 0., 0., 0., 0., 0., 2., 0., 0., -2., 0., 0., 3., 0., 0.,
        ];
        let x = input(DType::F64);
        let y = run1(&pool_node("MaxPool", DType::F64, [3, 3], [2, 2], "SAME"), std::slice::from_ref(&x)).unwrap();
        let dy: Vec<f64> = fs(18).iter().flat_map(|&v| [v, v]).collect();
        let dy = tensor(DType::F64, &[2, 3, 3, 2], &dy);
        let v2 = node("MaxPoolGradV2").attr("T", ty(DType::F64)).attr("padding", text("SAME"));
        let list = |v: [i32; 4]| Tensor::from_slice::<i32>([4], &v).unwrap();
        let dx = run1(&v2, &[x, y, dy, list([1, 3, 3, 1]), list([1, 2, 2, 1])]).unwrap();
        assert_values(&dx, &[2, 5, 5, 2], &want, "MaxPoolGradV2");
    }

    // Expected values: TensorFlow 2.21's AvgPoolGrad on CPU (float32).
    #[rustfmt::skip]
    const AVG_SAME_3X3_S2: [f64; 50] = [
        -0.25, 1.0, -0.25, 0.3333333134651184, 0.0, -0.6666666865348816, 0.25, -1.4166667461395264, 0.25, -0.75,
        0.0833333432674408, 0.6666666269302368, 0.4166666865348816, -0.11111114174127579, 0.3333333432674408,
        -0.7777777910232544, 1.25, -1.527777910232544, 0.9166666865348816, -0.75, 0.3333333432674408,
        -0.3333333432674408, 0.6666666865348816, -0.4444444477558136, 0.3333333432674408, -0.1111111119389534, 1.0,
        -0.1111111119389534, 0.6666666865348816, 0.0, -0.6666666269302368, -0.0833333432674408, -0.8333333134651184,
        0.1388888955116272, -0.1666666567325592, 0.222222238779068, 0.0, 0.9722222089767456, 0.1666666865348816, 0.75,
        -1.0, 0.25, -1.5, 0.5833333730697632, -0.5, 0.3333333432674408, -1.0, 1.0833333730697632, -0.5, 0.75,
    ];

    #[test]
    fn avg_pool_grad_matches_tensorflow() {
        let shape = shape_of(&[2, 5, 5, 2]);
        // The ramp repeats every 9 outputs: both images get the same.
        let n = pool_node("AvgPoolGrad", DType::F32, [3, 3], [2, 2], "SAME");
        let dx = run1(&n, &[shape.clone(), grad_of(DType::F32, &[2, 3, 3, 2])]).unwrap();
        assert_eq!(dx.dims(), &[2, 5, 5, 2]);
        let want = tensor(DType::F32, &[2, 5, 5, 2], &[AVG_SAME_3X3_S2, AVG_SAME_3X3_S2].concat());
        assert!(dx.bit_eq(&want), "SAME 3x3 stride 2: {:?}", dx.as_slice::<f32>().unwrap());
        // 1/3 in float32 times the gradient, not the gradient over 3.
        let n = pool_node("AvgPoolGrad", DType::F32, [2, 2], [2, 2], "SAME");
        let dy = Tensor::from_slice::<f32>([1, 2, 2, 1], &[0.7; 4]).unwrap();
        let dx = run1(&n, &[shape_of(&[1, 3, 3, 1]), dy]).unwrap();
        let want = [0.175, 0.175, 0.35, 0.175, 0.175, 0.35, 0.35, 0.35, 0.7];
        assert_eq!(dx.as_slice::<f32>().unwrap(), &want);
        // float64, stride 1: the even window pads after.
        let n = pool_node("AvgPoolGrad", DType::F64, [2, 2], [1, 1], "SAME");
        let dy: Vec<f64> = xs(9).iter().map(|v| v / 3.0).collect();
        let dx = run1(&n, &[shape_of(&[1, 3, 3, 1]), tensor(DType::F64, &[1, 3, 3, 1], &dy)]).unwrap();
        let want = [
            -0.4166666666666667,
            -0.25,
            -0.16666666666666666,
            0.0,
            0.25,
            -0.5833333333333334,
            1.0833333333333333,
            1.1666666666666665,
            -1.75,
        ];
        let got = dx.as_slice::<f64>().unwrap();
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-15, "{got:?}");
        }
    }

    fn dot(a: &Tensor, b: &Tensor) -> f64 {
        a.to_f64_vec().iter().zip(b.to_f64_vec()).map(|(x, y)| x * y).sum()
    }

    /// Distinct, well-separated values, so a small step moves no maximum.
    fn distinct(dims: &[usize], seed: usize) -> Tensor {
        let len: usize = dims.iter().product();
        let v: Vec<f64> = (0..len).map(|i| ((i * 7919 + seed * 104729) % 1009) as f64 / 50.0 - 10.0).collect();
        tensor(DType::F64, dims, &v)
    }

    /// ⟨avgpool(x), dy⟩ = ⟨x, dx⟩ (AvgPool is linear), and for MaxPool the
    /// directional derivative ⟨maxpool(x + εv) − maxpool(x), dy⟩ / ε =
    /// ⟨v, dx⟩ (exact, as no window's maximum changes).
    #[test]
    fn gradients_are_the_adjoints_of_the_forward_pooling() {
        let dims = [2, 7, 6, 3];
        for (ksize, strides, padding) in
            [([3, 3], [2, 2], "SAME"), ([2, 2], [2, 2], "VALID"), ([3, 2], [1, 2], "SAME"), ([1, 1], [2, 3], "VALID")]
        {
            let what = format!("{ksize:?} {strides:?} {padding}");
            let x = distinct(&dims, 1);
            let avg =
                run1(&pool_node("AvgPool", DType::F64, ksize, strides, padding), std::slice::from_ref(&x)).unwrap();
            let dy = distinct(avg.dims(), 2);
            let n = pool_node("AvgPoolGrad", DType::F64, ksize, strides, padding);
            let dx = run1(&n, &[shape_of(&dims), dy.clone()]).unwrap();
            assert!((dot(&avg, &dy) - dot(&x, &dx)).abs() < 1e-9, "AvgPool {what}");

            let max = pool_node("MaxPool", DType::F64, ksize, strides, padding);
            let y = run1(&max, std::slice::from_ref(&x)).unwrap();
            let dx = run1(
                &pool_node("MaxPoolGrad", DType::F64, ksize, strides, padding),
                &[x.clone(), y.clone(), dy.clone()],
            )
            .unwrap();
            let v = distinct(&dims, 3);
            let eps = 1e-4;
            let moved: Vec<f64> = x.to_f64_vec().iter().zip(v.to_f64_vec()).map(|(a, b)| a + eps * b).collect();
            let y2 = run1(&max, &[tensor(DType::F64, &dims, &moved)]).unwrap();
            let change: f64 =
                y2.to_f64_vec().iter().zip(y.to_f64_vec()).zip(dy.to_f64_vec()).map(|((a, b), g)| (a - b) * g).sum();
            assert!((change / eps - dot(&v, &dx)).abs() < 1e-6, "MaxPool {what}: {} vs {}", change / eps, dot(&v, &dx));
        }
    }

    #[test]
    fn large_gradients_split_by_image_without_changing_bits() {
        let pool = pool(3);
        let dims = [6, 64, 64, 16];
        let fill: Vec<f64> = (0..dims.iter().product()).map(|i: usize| ((i * 37) % 101) as f64 / 7.3 - 6.1).collect();
        let x = tensor(DType::F32, &dims, &fill);
        let max = pool_node("MaxPool", DType::F32, [3, 3], [2, 2], "SAME");
        let y = run1(&max, std::slice::from_ref(&x)).unwrap();
        let dy = grad_of(DType::F32, y.dims());
        let n = pool_node("MaxPoolGrad", DType::F32, [3, 3], [2, 2], "SAME");
        let inputs = [x, y, dy.clone()];
        let before = pool.count();
        let split = run_with_pool(&n, &inputs, &pool);
        assert!(pool.count() > before, "MaxPoolGrad was not split");
        assert!(split.bit_eq(&run1(&n, &inputs).unwrap()));
        let n = pool_node("AvgPoolGrad", DType::F32, [3, 3], [2, 2], "SAME");
        let inputs = [shape_of(&dims), dy];
        let before = pool.count();
        let split = run_with_pool(&n, &inputs, &pool);
        assert!(pool.count() > before, "AvgPoolGrad was not split");
        assert!(split.bit_eq(&run1(&n, &inputs).unwrap()));
    }

    #[test]
    fn empty_inputs_and_errors() {
        let f = DType::F32;
        let n = pool_node("MaxPoolGrad", f, [2, 2], [1, 1], "VALID");
        let empty = Tensor::zeros(f, [0, 4, 4, 2]).unwrap();
        let dx = max_grad(&n, &empty, &Tensor::zeros(f, [0, 3, 3, 2]).unwrap()).unwrap();
        assert_eq!(dx.dims(), &[0, 4, 4, 2]);
        let avg = pool_node("AvgPoolGrad", f, [2, 2], [1, 1], "VALID");
        let dx = run1(&avg, &[shape_of(&[1, 4, 4, 0]), Tensor::zeros(f, [1, 3, 3, 0]).unwrap()]).unwrap();
        assert_eq!(dx.dims(), &[1, 4, 4, 0]);
        let x = input(f);
        let msg = |n: &NodeSpec, inputs: &[Tensor]| run1(n, inputs).unwrap_err().into_message();
        let y = run1(&pool_node("MaxPool", f, [2, 2], [1, 1], "VALID"), std::slice::from_ref(&x)).unwrap();
        let bad_dy = grad_of(f, &[2, 3, 3, 2]);
        assert!(msg(&n, &[x.clone(), y.clone(), bad_dy.clone()]).contains("out_backprop has shape [2,3,3,2]"));
        assert!(msg(&n, &[x.clone(), bad_dy.clone(), grad_of(f, &[2, 4, 4, 2])]).contains("tensor_out has shape"));
        assert_eq!(
            msg(&n, &[grad_of(f, &[5, 5, 2]), y.clone(), y.clone()]),
            "tensor_in must be 4-dimensional: [5,5,2]"
        );
        assert!(msg(&avg, &[shape_of(&[2, 5, 5, 2]), bad_dy]).contains("out_backprop has shape [2,3,3,2]"));
        assert!(msg(&avg, &[shape_of(&[5, 5, 2]), y.clone()]).contains("orig_input_shape must be 1-dimensional"));
        let build = |n: NodeSpec| run1(&n, &[]).unwrap_err().into_message();
        let depth = n.clone().attr("ksize", ints(&[1, 1, 1, 2])).attr("strides", ints(&[1, 1, 1, 2]));
        assert_eq!(build(depth), "MaxPoolingGrad is not yet supported on the depth dimension.");
        let batch = n.clone().attr("ksize", ints(&[2, 1, 1, 1]));
        assert_eq!(build(batch), "Pooling is not yet supported on the batch dimension.");
        let avg_depth = avg.clone().attr("ksize", ints(&[1, 1, 1, 2]));
        assert_eq!(build(avg_depth), "Non-spatial pooling is not yet supported. Volunteers? :)");
        assert!(build(n.clone().attr("data_format", text("NCHW"))).contains("supports only data_format NHWC"));
        assert!(build(pool_node("AvgPoolGrad", f, [2, 2], [1, 1], "EXPLICIT")).contains("'padding' of \"EXPLICIT\""));
        assert!(
            build(pool_node("AvgPoolGrad", DType::I32, [2, 2], [1, 1], "VALID"))
                .contains("AvgPoolGrad does not support dtype int32")
        );
        assert!(
            build(pool_node("MaxPoolGrad", DType::Bool, [2, 2], [1, 1], "VALID"))
                .contains("MaxPoolGrad does not support dtype bool")
        );
        let v2 = node("MaxPoolGradV2").attr("T", ty(f)).attr("padding", text("VALID"));
        let list = |v: &[i32]| Tensor::from_slice::<i32>([v.len()], v).unwrap();
        let e = msg(&v2, &[x.clone(), y.clone(), y.clone(), list(&[1, 2, 2]), list(&[1, 1, 1, 1])]);
        assert_eq!(e, "Sliding window ksize field must specify 4 dimensions");
        let e = msg(&v2, &[x, y.clone(), y, list(&[1, 2, 2, 2]), list(&[1, 1, 1, 2])]);
        assert_eq!(e, "MaxPoolingGrad is not yet supported on the depth dimension.");
    }
}
