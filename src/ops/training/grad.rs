//! Gradients of activations and of BiasAdd, and L2Loss.
//! - Of activations, given the incoming gradient and the forward op's input
//!   (or output): `ReluGrad`, `Relu6Grad`, `EluGrad`, `SoftplusGrad`,
//!   `SoftsignGrad`, `LeakyReluGrad`, which require operands of one shape;
//!   and given the forward op's output `y` and the gradient `dy`:
//!   `SigmoidGrad`, `TanhGrad`, `RsqrtGrad`, `SqrtGrad`, `ReciprocalGrad`
//!   (and `InvGrad`), which require only as many elements and give `y`'s
//!   shape, as TensorFlow's do.
//! - `BiasAddGrad`: the sum over every dimension but the channel one (the
//!   last for NHWC, the second for NCHW).
//! - `L2Loss`: `sum(t^2) / 2`.
//!
//! Owns: these kernels, each computing TensorFlow's functor in its
//! operation order (`dy * y * (1 - y)` is `(dy * y) * (1 - y)`), so float32
//! results match. Results are written over an operand when it is uniquely
//! owned. Must not hold state beyond parsed attributes.

use crate::bail;
use crate::error::Result;
use crate::ops::math::{FLOAT, REAL, binary_signature, unary_signature};
use crate::ops::numeric::{Float, Num};
use crate::ops::registry::OpDef;
use crate::ops::{ComputeFn, FnKernel, KernelInit, OpContext, OpKernel, unsupported_dtype};
use crate::tensor::{DType, Element, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("ReluGrad", binary_signature, build_grad::<ReluGrad, true>),
    OpDef::kernel("Relu6Grad", binary_signature, build_grad::<Relu6Grad, true>),
    OpDef::kernel("EluGrad", binary_signature, build_float_grad::<EluGrad, true>),
    OpDef::kernel("SoftplusGrad", binary_signature, build_float_grad::<SoftplusGrad, true>),
    OpDef::kernel("SoftsignGrad", binary_signature, build_float_grad::<SoftsignGrad, true>),
    OpDef::kernel("LeakyReluGrad", binary_signature, build_float_grad::<LeakyReluGrad, true>),
    OpDef::kernel("SigmoidGrad", binary_signature, build_float_grad::<SigmoidGrad, false>),
    OpDef::kernel("TanhGrad", binary_signature, build_float_grad::<TanhGrad, false>),
    OpDef::kernel("RsqrtGrad", binary_signature, build_float_grad::<RsqrtGrad, false>),
    OpDef::kernel("SqrtGrad", binary_signature, build_float_grad::<SqrtGrad, false>),
    OpDef::kernel("ReciprocalGrad", binary_signature, build_float_grad::<ReciprocalGrad, false>),
    OpDef::kernel("InvGrad", binary_signature, build_float_grad::<ReciprocalGrad, false>),
    OpDef::kernel("BiasAddGrad", unary_signature, build_bias_add_grad),
    OpDef::kernel("L2Loss", unary_signature, build_l2_loss),
];

// ---------------------------------------------------------------------------
// Elementwise gradients

/// A gradient function of two elements, with an optional parameter from
/// the node's attributes (LeakyRelu's `alpha`).
pub trait GradOp<T: Num>: 'static {
    fn param(_alpha: f32) -> T {
        T::ZERO
    }
    fn apply(a: T, b: T, param: T) -> T;
}

/// `gradients * (features > 0)`: a NaN or infinite gradient stays NaN
/// where the feature is not positive, as TensorFlow's product gives.
pub struct ReluGrad;
impl<T: Num> GradOp<T> for ReluGrad {
    #[inline(always)]
    fn apply(g: T, f: T, _: T) -> T {
        g.mul(if f > T::ZERO { T::ONE } else { T::ZERO })
    }
}

/// `gradients * (features > 0 && features < 6)`.
pub struct Relu6Grad;
impl<T: Num> GradOp<T> for Relu6Grad {
    #[inline(always)]
    fn apply(g: T, f: T, _: T) -> T {
        g.mul(if f > T::ZERO && f < T::from_usize(6) { T::ONE } else { T::ZERO })
    }
}

/// `outputs < 0 ? (outputs + 1) * gradients : gradients`.
pub struct EluGrad;
impl<T: Float> GradOp<T> for EluGrad {
    #[inline(always)]
    fn apply(g: T, y: T, _: T) -> T {
        if y < T::ZERO { y.add(T::ONE).mul(g) } else { g }
    }
}

/// `gradients / (exp(-features) + 1)`.
pub struct SoftplusGrad;
impl<T: Float> GradOp<T> for SoftplusGrad {
    #[inline(always)]
    fn apply(g: T, f: T, _: T) -> T {
        g.div(f.neg().exp().add(T::ONE))
    }
}

/// `gradients / (|features| + 1)^2`.
pub struct SoftsignGrad;
impl<T: Float> GradOp<T> for SoftsignGrad {
    #[inline(always)]
    fn apply(g: T, f: T, _: T) -> T {
        let d = f.abs().add(T::ONE);
        g.div(d.mul(d))
    }
}

/// `features > 0 ? gradients : gradients * alpha`.
pub struct LeakyReluGrad;
impl<T: Float> GradOp<T> for LeakyReluGrad {
    fn param(alpha: f32) -> T {
        T::from_f64(alpha as f64)
    }
    #[inline(always)]
    fn apply(g: T, f: T, alpha: T) -> T {
        if f > T::ZERO { g } else { g.mul(alpha) }
    }
}

/// `dy * y * (1 - y)`.
pub struct SigmoidGrad;
impl<T: Float> GradOp<T> for SigmoidGrad {
    #[inline(always)]
    fn apply(y: T, dy: T, _: T) -> T {
        dy.mul(y).mul(T::ONE.sub(y))
    }
}

/// `dy * (1 - y * y)`.
pub struct TanhGrad;
impl<T: Float> GradOp<T> for TanhGrad {
    #[inline(always)]
    fn apply(y: T, dy: T, _: T) -> T {
        dy.mul(T::ONE.sub(y.mul(y)))
    }
}

/// `-0.5 * (dy * y) * (y * y)`.
pub struct RsqrtGrad;
impl<T: Float> GradOp<T> for RsqrtGrad {
    #[inline(always)]
    fn apply(y: T, dy: T, _: T) -> T {
        T::from_f64(-0.5).mul(dy.mul(y)).mul(y.mul(y))
    }
}

/// `0.5 * dy / y`.
pub struct SqrtGrad;
impl<T: Float> GradOp<T> for SqrtGrad {
    #[inline(always)]
    fn apply(y: T, dy: T, _: T) -> T {
        T::from_f64(0.5).mul(dy).div(y)
    }
}

/// `-dy * y * y`.
pub struct ReciprocalGrad;
impl<T: Float> GradOp<T> for ReciprocalGrad {
    #[inline(always)]
    fn apply(y: T, dy: T, _: T) -> T {
        dy.neg().mul(y).mul(y)
    }
}

type GradFn = fn(&GradKernel, &mut OpContext<'_>) -> Result<()>;

/// An elementwise gradient, monomorphised per op and dtype; it keeps the
/// node's name for TensorFlow's same-shape message, and `alpha`.
struct GradKernel {
    compute: GradFn,
    alpha: f32,
    node: String,
    op: String,
}

impl OpKernel for GradKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        (self.compute)(self, ctx)
    }
}

fn grad_kernel(init: &KernelInit<'_>, compute: GradFn) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(GradKernel {
        compute,
        alpha: init.node.attr_float_or("alpha", 0.2)?,
        node: init.node.name.clone(),
        op: init.node.op.clone(),
    }))
}

/// For ops TensorFlow defines on every real type.
fn build_grad<Op, const SAME_SHAPE: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>>
where
    Op: GradOp<f32> + GradOp<f64> + GradOp<i32> + GradOp<i64>,
{
    let dtype = init.node.attr_dtype("T")?;
    let compute: GradFn = match dtype {
        DType::F32 => run_grad::<f32, Op, SAME_SHAPE>,
        DType::F64 => run_grad::<f64, Op, SAME_SHAPE>,
        DType::I32 => run_grad::<i32, Op, SAME_SHAPE>,
        DType::I64 => run_grad::<i64, Op, SAME_SHAPE>,
        _ => {
            return Err(unsupported_dtype(&init.node.op, dtype, REAL));
        }
    };
    grad_kernel(init, compute)
}

/// For ops TensorFlow defines on floats only.
fn build_float_grad<Op, const SAME_SHAPE: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>>
where
    Op: GradOp<f32> + GradOp<f64>,
{
    let dtype = init.node.attr_dtype("T")?;
    let compute: GradFn = match dtype {
        DType::F32 => run_grad::<f32, Op, SAME_SHAPE>,
        DType::F64 => run_grad::<f64, Op, SAME_SHAPE>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, FLOAT)),
    };
    grad_kernel(init, compute)
}

/// With `SAME_SHAPE` the operands must have one shape (the activation
/// family); without, one element count.
fn run_grad<T: Num, Op: GradOp<T>, const SAME_SHAPE: bool>(kernel: &GradKernel, ctx: &mut OpContext<'_>) -> Result<()> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    if SAME_SHAPE && a.shape() != b.shape() {
        bail!(
            invalid_argument,
            "Inputs to operation {} of type {} must have the same size and shape.  Input 0: {} != input 1: {}",
            kernel.node,
            kernel.op,
            a.shape(),
            b.shape()
        );
    }
    if a.num_elements() != b.num_elements() {
        bail!(
            invalid_argument,
            "The two arguments to a cwise op must have same number of elements, got {} and {}",
            a.num_elements(),
            b.num_elements()
        );
    }
    let param = Op::param(kernel.alpha);
    let out = zip_in_place::<T>(ctx.take_input(0)?, ctx.take_input(1)?, |x, y| Op::apply(x, y, param))?;
    ctx.set_output(0, out);
    Ok(())
}

/// `f(a[i], b[i])` in `a`'s shape, written over `a`, or over `b` when it
/// has that shape, when one is uniquely owned.
fn zip_in_place<T: Element>(mut a: Tensor, mut b: Tensor, f: impl Fn(T, T) -> T) -> Result<Tensor> {
    if let Some(sa) = a.try_slice_mut::<T>() {
        for (x, &y) in sa.iter_mut().zip(b.as_slice::<T>()?) {
            *x = f(*x, y);
        }
        return Ok(a);
    }
    if a.dims() == b.dims() {
        if let Some(sb) = b.try_slice_mut::<T>() {
            for (y, &x) in sb.iter_mut().zip(a.as_slice::<T>()?) {
                *y = f(x, *y);
            }
            return Ok(b);
        }
    }
    Tensor::from_zip_map(a.shape().clone(), a.as_slice::<T>()?, b.as_slice::<T>()?, f)
}

// ---------------------------------------------------------------------------
// BiasAddGrad

fn build_bias_add_grad(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let nchw = match init.node.attr_str_or("data_format", "NHWC")?.as_str() {
        "NHWC" => false,
        "NCHW" => true,
        other => bail!(invalid_argument, "Invalid data format '{other}' for BiasAddGrad"),
    };
    let compute: ComputeFn = match (dtype, nchw) {
        (DType::F32, false) => bias_add_grad::<f32, false>,
        (DType::F32, true) => bias_add_grad::<f32, true>,
        (DType::F64, false) => bias_add_grad::<f64, false>,
        (DType::F64, true) => bias_add_grad::<f64, true>,
        (DType::I32, false) => bias_add_grad::<i32, false>,
        (DType::I32, true) => bias_add_grad::<i32, true>,
        (DType::I64, false) => bias_add_grad::<i64, false>,
        (DType::I64, true) => bias_add_grad::<i64, true>,
        _ => {
            return Err(unsupported_dtype(&init.node.op, dtype, REAL));
        }
    };
    Ok(FnKernel::boxed(compute))
}

/// Sums accumulate in `T::Acc` (f64 for float32), at least as accurate as
/// TensorFlow's float32 tree reduction.
fn bias_add_grad<T: Num, const NCHW: bool>(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    if x.rank() < 2 {
        bail!(invalid_argument, "Input tensor must be at least 2D: {}", x.shape());
    }
    let channel_dim = if NCHW { 1 } else { x.rank() - 1 };
    let channels = x.dims()[channel_dim];
    let inner: usize = x.dims()[channel_dim + 1..].iter().product();
    let values = x.as_slice::<T>()?;
    let mut sums = vec![<T::Acc as Num>::ZERO; channels];
    if !values.is_empty() {
        if inner == 1 {
            for row in values.chunks_exact(channels) {
                for (s, &v) in sums.iter_mut().zip(row) {
                    *s = s.add(v.widen());
                }
            }
        } else {
            for block in values.chunks_exact(channels * inner) {
                for (s, run) in sums.iter_mut().zip(block.chunks_exact(inner)) {
                    *s = run.iter().fold(*s, |acc, &v| acc.add(v.widen()));
                }
            }
        }
    }
    let out = Tensor::from_map([channels], &sums, T::narrow)?;
    ctx.set_output(0, out);
    Ok(())
}

// ---------------------------------------------------------------------------
// L2Loss

fn build_l2_loss(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: ComputeFn = match dtype {
        DType::F32 => l2_loss::<f32>,
        DType::F64 => l2_loss::<f64>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, FLOAT)),
    };
    Ok(FnKernel::boxed(compute))
}

/// `sum(t * t * 0.5)`, the halves taken per element as TensorFlow does,
/// summed in `T::Acc`.
fn l2_loss<T: Float>(ctx: &mut OpContext<'_>) -> Result<()> {
    let half = T::from_f64(0.5);
    let sum = ctx
        .input(0)?
        .as_slice::<T>()?
        .iter()
        .fold(<T::Acc as Num>::ZERO, |acc, &x| acc.add(x.mul(x).mul(half).widen()));
    ctx.set_output(0, Tensor::scalar(T::narrow(sum)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::{AttrValue, NodeSpec};
    use crate::ops::testing::{node, run1, ty};

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(shape, v).unwrap()
    }

    fn op(name: &str, t: DType) -> NodeSpec {
        node(name).attr("T", ty(t))
    }

    /// Within a few float32 ulps, NaN matching NaN.
    fn close(got: &Tensor, want: &[f64]) {
        let got = got.to_f64_vec();
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
            let ok = (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-7 + 4e-7 * b.abs();
            assert!(ok, "element {i}: got {a}, want {b}");
        }
    }

    const FEATURES: [f32; 6] = [-3.0, -0.5, 0.0, 0.5, 7.0, 6.0];
    const GRADS: [f32; 6] = [1.5, -2.0, 3.0, 0.25, -1.0, 2.0];

    // Expected values: TensorFlow 2.21, tf.raw_ops on CPU, float32.
    #[test]
    fn activation_gradients_match_tf() {
        let (g, f) = (f32s(&[2, 3], &GRADS), f32s(&[2, 3], &FEATURES));
        let run = |name: &str, a: &Tensor, b: &Tensor| run1(&op(name, DType::F32), &[a.clone(), b.clone()]).unwrap();
        let relu = run("ReluGrad", &g, &f);
        assert_eq!(relu.dims(), &[2, 3]);
        close(&relu, &[0.0, 0.0, 0.0, 0.25, -1.0, 2.0]);
        close(&run("Relu6Grad", &g, &f), &[0.0, 0.0, 0.0, 0.25, 0.0, 0.0]);
        // EluGrad takes Elu's outputs.
        let elu_out = f32s(&[6], &[-0.95021296, -0.39346933, 0.0, 0.5, 7.0, 6.0]);
        let g6 = f32s(&[6], &GRADS);
        close(&run("EluGrad", &g6, &elu_out), &[0.07468056678771973, -1.2130613327026367, 3.0, 0.25, -1.0, 2.0]);
        close(
            &run("SoftplusGrad", &g, &f),
            &[
                0.07113880664110184,
                -0.7550813555717468,
                1.5,
                0.15561483800411224,
                -0.9990890026092529,
                1.995054841041565,
            ],
        );
        close(
            &run("SoftsignGrad", &g, &f),
            &[0.09375, -0.8888888955116272, 3.0, 0.1111111119389534, -0.015625, 0.040816325694322586],
        );
        let leaky = op("LeakyReluGrad", DType::F32).attr("alpha", AttrValue::Float(0.1));
        close(
            &run1(&leaky, &[g.clone(), f.clone()]).unwrap(),
            &[0.15000000596046448, -0.20000000298023224, 0.30000001192092896, 0.25, -1.0, 2.0],
        );
        // A non-finite gradient times a zero indicator is NaN, as in TF.
        let nan = run("ReluGrad", &f32s(&[3], &[f32::INFINITY, f32::NAN, 1.0]), &f32s(&[3], &[-1.0, 2.0, f32::NAN]));
        close(&nan, &[f64::NAN, f64::NAN, 0.0]);
        let ints = run1(
            &op("ReluGrad", DType::I32),
            &[
                Tensor::from_slice::<i32>([3], &[1, -2, 3]).unwrap(),
                Tensor::from_slice::<i32>([3], &[1, -1, 0]).unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(ints.as_slice::<i32>().unwrap(), &[1, 0, 0]);
        assert!(run1(&op("EluGrad", DType::I32), &[]).is_err(), "float only");
    }

    #[test]
    fn output_derivative_gradients_match_tf() {
        let y = f32s(&[2, 3], &[0.1, 0.5, 0.9, 0.25, 0.75, 2.0]);
        let dy = f32s(&[2, 3], &GRADS);
        let run = |name: &str| run1(&op(name, DType::F32), &[y.clone(), dy.clone()]).unwrap();
        close(&run("SigmoidGrad"), &[0.13500000536441803, -0.5, 0.27000004053115845, 0.046875, -0.1875, -4.0]);
        close(&run("TanhGrad"), &[1.4850000143051147, -1.5, 0.570000171661377, 0.234375, -0.4375, -6.0]);
        close(&run("RsqrtGrad"), &[-0.0007500000647269189, 0.125, -1.0934998989105225, -0.001953125, 0.2109375, -8.0]);
        close(&run("SqrtGrad"), &[7.5, -2.0, 1.6666667461395264, 0.5, -0.6666666865348816, 0.5]);
        let reciprocal = [-0.015000000596046448, 0.5, -2.429999828338623, -0.015625, 0.5625, -8.0];
        close(&run("ReciprocalGrad"), &reciprocal);
        close(&run("InvGrad"), &reciprocal);
        // float64: y / 3 against the same gradients.
        let y64 = Tensor::from_map([6], &[0.1f32, 0.5, 0.9, 0.25, 0.75, 2.0], |v| v as f64 / 3.0).unwrap();
        let dy64 = Tensor::from_map([6], &GRADS, |v| v as f64).unwrap();
        let out = run1(&op("SigmoidGrad", DType::F64), &[y64, dy64]).unwrap();
        let want = [
            0.04833333402872085,
            -0.2777777777777778,
            0.6299999904632566,
            0.01909722222222222,
            -0.1875,
            0.4444444444444445,
        ];
        for (a, b) in out.as_slice::<f64>().unwrap().iter().zip(want) {
            assert!((a - b).abs() < 1e-15, "{a} vs {b}");
        }
    }

    #[test]
    fn operand_shapes_are_checked_like_tf() {
        let (a, b) = (f32s(&[2, 3], &[1.0; 6]), f32s(&[3, 2], &[1.0; 6]));
        let err = run1(&op("ReluGrad", DType::F32), &[a.clone(), b.clone()]).unwrap_err();
        assert_eq!(
            err.message,
            "Inputs to operation test_ReluGrad of type ReluGrad must have the same size and shape.  Input 0: [2,3] != input 1: [3,2]"
        );
        // The output-derivative family wants only as many elements, and
        // answers in y's shape.
        let out = run1(&op("SqrtGrad", DType::F32), &[a.clone(), b]).unwrap();
        assert_eq!(out.dims(), &[2, 3]);
        close(&out, &[0.5; 6]);
        let err = run1(&op("TanhGrad", DType::F32), &[a, f32s(&[5], &[1.0; 5])]).unwrap_err();
        assert_eq!(err.message, "The two arguments to a cwise op must have same number of elements, got 6 and 5");
        let empty = f32s(&[0, 3], &[]);
        assert_eq!(run1(&op("ReluGrad", DType::F32), &[empty.clone(), empty]).unwrap().dims(), &[0, 3]);
    }

    #[test]
    fn gradients_reuse_a_unique_operand() {
        let g = f32s(&[4096], &[1.0; 4096]);
        let ptr = g.data_ptr();
        let f = f32s(&[4096], &[2.0; 4096]);
        let resources = crate::ops::ResourceMgr::default();
        let inputs = vec![crate::ops::Value::Tensor(g), crate::ops::Value::Tensor(f)];
        let out = crate::ops::run_kernel_once(&op("ReluGrad", DType::F32), inputs, &resources).unwrap();
        assert_eq!(out[0].as_tensor().unwrap().data_ptr(), ptr);
    }

    #[test]
    fn bias_add_grad_sums_all_but_channels() {
        // Expected values: TensorFlow, np.linspace(-2, 3, 24) as [2,3,2,2].
        let x = Tensor::from_map([2, 3, 2, 2], &(0..24).collect::<Vec<_>>(), |i| -2.0 + 5.0 * i as f32 / 23.0).unwrap();
        let nchw = op("BiasAddGrad", DType::F32).attr("data_format", AttrValue::Bytes(b"NCHW".to_vec()));
        close(
            &run1(&nchw, std::slice::from_ref(&x)).unwrap(),
            &[-2.956521511077881, 3.999999523162842, 10.956521987915039],
        );
        let nhwc = run1(&op("BiasAddGrad", DType::F32), std::slice::from_ref(&x)).unwrap();
        close(&nhwc, &[4.695652008056641, 7.304347515106201]);
        // Rank 2: the channel is the last dimension either way.
        let m = Tensor::from_slice::<i32>([2, 3], &[0, 1, 2, 3, 4, 5]).unwrap();
        let out = run1(&op("BiasAddGrad", DType::I32), std::slice::from_ref(&m)).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), &[3, 5, 7]);
        let nchw_i = op("BiasAddGrad", DType::I32).attr("data_format", AttrValue::Bytes(b"NCHW".to_vec()));
        assert_eq!(run1(&nchw_i, &[m]).unwrap().as_slice::<i32>().unwrap(), &[3, 5, 7]);
        let empty = run1(&op("BiasAddGrad", DType::F32), &[f32s(&[0, 3], &[])]).unwrap();
        close(&empty, &[0.0; 3]);
        let err = run1(&op("BiasAddGrad", DType::F32), &[f32s(&[3], &[0.0; 3])]).unwrap_err();
        assert_eq!(err.message, "Input tensor must be at least 2D: [3]");
        let bad = op("BiasAddGrad", DType::F32).attr("data_format", AttrValue::Bytes(b"NDHWC".to_vec()));
        assert!(run1(&bad, &[]).is_err());
    }

    #[test]
    fn l2_loss_is_half_the_sum_of_squares() {
        let x = Tensor::from_map([2, 3, 2, 2], &(0..24).collect::<Vec<_>>(), |i| -2.0 + 5.0 * i as f32 / 23.0).unwrap();
        let out = run1(&op("L2Loss", DType::F32), &[x]).unwrap();
        assert!(out.shape().is_scalar());
        close(&out, &[30.173912048339844]);
        close(&run1(&op("L2Loss", DType::F32), &[f32s(&[2, 2], &[1., 2., 3., 4.5])]).unwrap(), &[17.125]);
        close(&run1(&op("L2Loss", DType::F32), &[f32s(&[0, 2], &[])]).unwrap(), &[0.0]);
        let d = run1(&op("L2Loss", DType::F64), &[Tensor::scalar(3.0f64)]).unwrap();
        assert_eq!(d.scalar_value::<f64>().unwrap(), 4.5);
        assert!(run1(&op("L2Loss", DType::I32), &[]).is_err(), "float only, as in TF");
    }
}
