//! Neural-network ops: activations (Relu, Relu6, Elu, Softplus, Softsign,
//! LeakyRelu), BiasAdd, Softmax and LogSoftmax here; convolutions
//! ([`conv`], [`depthwise`], their gradients in [`conv_grad`]), pooling
//! ([`pool`]), 3-D convolution and pooling ([`volume`], the convolution's gradients
//! and transpose in [`volume_grad`]), batch
//! normalisation ([`batch_norm`]), LRN ([`lrn`]) and fake quantization
//! ([`fake_quant`], and with a zero-exact scale [`quantize_dequantize`]), CTC greedy decoding ([`ctc`]) and the CTC loss
//! ([`ctc_loss`]) in the submodules,
//! each with its own `DEFS`, sharing one window geometry (`window`).
//!
//! Owns: these kernels and their signatures. Elementwise activations reuse
//! math's unary driver (in place when the input is uniquely owned). Must
//! not hold state beyond parsed attributes.

pub mod batch_norm;
pub mod batch_norm_grad;
pub mod conv;
pub mod conv_grad;
pub mod ctc;
pub mod ctc_loss;
pub mod depthwise;
pub mod fake_quant;
pub mod lrn;
pub mod patches;
pub mod pool;
pub mod pool_grad;
pub mod quantize_dequantize;
pub mod volume;
pub mod volume_grad;
mod window;

use super::math::{FLOAT, REAL, Unary, build_float_unary, build_real_unary, unary_signature};
use super::numeric::{Float, Num};
use super::registry::OpDef;
use super::{ComputeFn, FnKernel, KernelInit, OpContext, OpKernel, unsupported_dtype};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Relu", unary_signature, build_real_unary::<Relu>),
    OpDef::kernel("Relu6", unary_signature, build_real_unary::<Relu6>),
    OpDef::kernel("Elu", unary_signature, build_float_unary::<Elu>),
    OpDef::kernel("Selu", unary_signature, build_float_unary::<Selu>),
    OpDef::kernel("Softplus", unary_signature, build_float_unary::<Softplus>),
    OpDef::kernel("Softsign", unary_signature, build_float_unary::<Softsign>),
    OpDef::kernel("LeakyRelu", unary_signature, build_leaky_relu),
    OpDef::kernel("BiasAdd", bias_add_signature, build_bias_add),
    OpDef::kernel("BiasAddV1", bias_add_signature, build_bias_add),
    OpDef::kernel("Softmax", unary_signature, build_softmax::<false>),
    OpDef::kernel("LogSoftmax", unary_signature, build_softmax::<true>),
];

// ---------------------------------------------------------------------------
// Activations

/// max(x, 0), keeping NaN (Eigen's `cwiseMax` returns its left operand when
/// the comparison fails).
pub struct Relu;
impl<T: Num> Unary<T> for Relu {
    #[inline(always)]
    fn apply(x: T) -> T {
        if x < T::ZERO { T::ZERO } else { x }
    }
}

/// min(max(x, 0), 6), keeping NaN.
pub struct Relu6;
impl<T: Num> Unary<T> for Relu6 {
    #[inline(always)]
    fn apply(x: T) -> T {
        let six = T::from_usize(6);
        if x < T::ZERO {
            T::ZERO
        } else if x > six {
            six
        } else {
            x
        }
    }
}

/// x for x >= 0, e^x - 1 below: TensorFlow computes `exp(x) - 1`, not
/// `expm1`, and so does this, to give the same numbers near 0.
pub struct Elu;
impl<T: Float> Unary<T> for Elu {
    #[inline(always)]
    fn apply(x: T) -> T {
        if x < T::ZERO { x.exp().sub(T::ONE) } else { x }
    }
}

/// scale · x for x >= 0, scale · alpha · (e^x - 1) below, with the
/// constants of Klambauer et al. that TensorFlow uses.
pub struct Selu;
impl<T: Float> Unary<T> for Selu {
    #[inline(always)]
    fn apply(x: T) -> T {
        let scale = T::from_f64(1.050_700_987_355_480_5);
        let alpha = T::from_f64(1.673_263_242_354_377_3);
        if x < T::ZERO { scale.mul(alpha).mul(x.exp().sub(T::ONE)) } else { scale.mul(x) }
    }
}

/// log(1 + e^x), with TensorFlow's cut-offs: x itself above
/// `-log(eps) - 2`, e^x below `log(eps) + 2`.
pub struct Softplus;
impl<T: Float> Unary<T> for Softplus {
    #[inline(always)]
    fn apply(x: T) -> T {
        let threshold = T::EPSILON.ln().add(T::from_f64(2.0));
        if x > threshold.neg() {
            x
        } else if x < threshold {
            x.exp()
        } else {
            x.exp().ln_1p()
        }
    }
}

/// x / (1 + |x|).
pub struct Softsign;
impl<T: Float> Unary<T> for Softsign {
    #[inline(always)]
    fn apply(x: T) -> T {
        x.div(T::ONE.add(x.abs()))
    }
}

/// x for x > 0, alpha * x otherwise (attr `alpha`, default 0.2).
struct LeakyReluKernel {
    alpha: f32,
    dtype: DType,
}

fn build_leaky_relu(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    if !FLOAT.contains(&dtype) {
        return Err(unsupported_dtype(&init.node.op, dtype, FLOAT));
    }
    let alpha = init.node.attr_float_or("alpha", 0.2)?;
    Ok(Box::new(LeakyReluKernel { alpha, dtype }))
}

fn leaky<T: Float>(x: Tensor, alpha: f32) -> Result<Tensor> {
    let alpha = T::from_f64(alpha as f64);
    super::broadcast::unary_in_place::<T>(x, |v| if v > T::ZERO { v } else { v.mul(alpha) })
}

impl OpKernel for LeakyReluKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let x = ctx.take_input(0)?;
        let out = match self.dtype {
            DType::F64 => leaky::<f64>(x, self.alpha)?,
            _ => leaky::<f32>(x, self.alpha)?,
        };
        ctx.set_output(0, out);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// BiasAdd

fn bias_add_signature(node: &NodeSpec) -> Result<super::OpSignature> {
    super::math::binary_signature(node)
}

/// Adds a 1-D bias along the channel dimension: the last one for NHWC
/// (and BiasAddV1), dimension 1 for NCHW.
struct BiasAddKernel {
    compute: fn(Tensor, &Tensor, bool) -> Result<Tensor>,
    nchw: bool,
}

fn build_bias_add(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let format = init.node.attr_str_or("data_format", "NHWC")?;
    let nchw = match format.as_str() {
        "NHWC" => false,
        "NCHW" => true,
        other => bail!(invalid_argument, "Invalid data format '{other}' for BiasAdd"),
    };
    let compute: fn(Tensor, &Tensor, bool) -> Result<Tensor> = match dtype {
        DType::F32 => bias_add::<f32>,
        DType::F64 => bias_add::<f64>,
        DType::I32 => bias_add::<i32>,
        DType::I64 => bias_add::<i64>,
        _ => {
            return Err(unsupported_dtype(&init.node.op, dtype, REAL));
        }
    };
    Ok(Box::new(BiasAddKernel { compute, nchw }))
}

fn bias_add<T: Num>(mut value: Tensor, bias: &Tensor, nchw: bool) -> Result<Tensor> {
    if value.rank() < 2 {
        bail!(invalid_argument, "Input tensor must be at least 2D: {}", value.shape());
    }
    if bias.rank() != 1 {
        bail!(invalid_argument, "Biases must be 1D: {}", bias.shape());
    }
    let channel_dim = if nchw { 1 } else { value.rank() - 1 };
    let channels = value.dims()[channel_dim];
    if bias.dims()[0] != channels {
        bail!(
            invalid_argument,
            "Must provide as many biases as the channel dimension of the input tensor: {} vs. {}",
            bias.shape(),
            value.shape()
        );
    }
    let b = bias.as_slice::<T>()?;
    if value.num_elements() == 0 {
        return Ok(value);
    }
    // Elements sharing one bias value are `inner` apart in runs of `inner`.
    let inner: usize = value.dims()[channel_dim + 1..].iter().product();
    let add = |out: &mut [T], src: &[T]| {
        for (chunk_out, chunk_in) in out.chunks_exact_mut(channels * inner).zip(src.chunks_exact(channels * inner)) {
            let runs = chunk_out.chunks_exact_mut(inner).zip(chunk_in.chunks_exact(inner));
            for ((run_out, run_in), &bc) in runs.zip(b) {
                for (o, &x) in run_out.iter_mut().zip(run_in) {
                    *o = x.add(bc);
                }
            }
        }
    };
    if let Some(s) = value.try_slice_mut::<T>() {
        // In place: read and write the same buffer, one chunk at a time.
        for chunk in s.chunks_exact_mut(channels * inner) {
            for (run, &bc) in chunk.chunks_exact_mut(inner).zip(b) {
                run.iter_mut().for_each(|x| *x = x.add(bc));
            }
        }
        return Ok(value);
    }
    let src = value.as_slice::<T>()?;
    Tensor::build::<T>(value.shape().clone(), |out| add(out, src))
}

impl OpKernel for BiasAddKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let value = ctx.take_input(0)?;
        let out = (self.compute)(value, ctx.input(1)?, self.nchw)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Softmax

/// Softmax over the last dimension, as TensorFlow computes it:
/// `e = exp(x - max)`, then `e * (1 / sum(e))`; LogSoftmax is
/// `(x - max) - log(sum(e))`. Sums accumulate in f64.
fn softmax<T: Float, const LOG: bool>(ctx: &mut OpContext<'_>) -> Result<()> {
    let mut logits = ctx.take_input(0)?;
    if logits.rank() < 1 {
        bail!(invalid_argument, "logits must have >= 1 dimension, got {}", logits.shape());
    }
    let classes = logits.dims()[logits.rank() - 1];
    if logits.num_elements() == 0 {
        ctx.set_output(0, logits);
        return Ok(());
    }
    let row = |out: &mut [T]| {
        let max = out.iter().fold(T::BOTTOM, |m, &x| if x > m { x } else { m });
        let mut sum = 0.0f64;
        if LOG {
            for x in out.iter_mut() {
                *x = x.sub(max);
                sum += x.exp().to_f64();
            }
            let log_sum = T::from_f64(sum.ln());
            out.iter_mut().for_each(|x| *x = x.sub(log_sum));
        } else {
            for x in out.iter_mut() {
                *x = x.sub(max).exp();
                sum += x.to_f64();
            }
            let inv = T::ONE.div(T::from_f64(sum));
            out.iter_mut().for_each(|x| *x = x.mul(inv));
        }
    };
    if logits.try_slice_mut::<T>().is_none() {
        logits = logits.deep_copy();
    }
    match logits.try_slice_mut::<T>() {
        Some(s) => s.chunks_exact_mut(classes).for_each(row),
        None => bail!(internal, "softmax: a fresh copy is not writable"),
    }
    ctx.set_output(0, logits);
    Ok(())
}

fn build_softmax<const LOG: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    let compute: ComputeFn = match dtype {
        DType::F32 => softmax::<f32, LOG>,
        DType::F64 => softmax::<f64, LOG>,
        _ => return Err(unsupported_dtype(&init.node.op, dtype, FLOAT)),
    };
    Ok(FnKernel::boxed(compute))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(shape, v).unwrap()
    }
    fn op(name: &str, t: DType) -> NodeSpec {
        node(name).attr("T", ty(t))
    }
    fn close(got: &Tensor, want: &[f32]) {
        let g = got.as_slice::<f32>().unwrap();
        assert_eq!(g.len(), want.len());
        for (i, (&a, &b)) in g.iter().zip(want).enumerate() {
            let ok = (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-6 + 1e-5 * b.abs();
            assert!(ok, "element {i}: got {a}, want {b}");
        }
    }

    #[test]
    // numpy's float32 results; softplus(0) happens to be ln 2.
    #[allow(clippy::approx_constant)]
    fn activations_match_tf() {
        let x = f32s(&[6], &[-3.0, -0.5, 0.0, 0.5, 7.0, f32::NAN]);
        let relu = run1(&op("Relu", DType::F32), std::slice::from_ref(&x)).unwrap();
        close(&relu, &[0., 0., 0., 0.5, 7., f32::NAN]);
        let relu6 = run1(&op("Relu6", DType::F32), std::slice::from_ref(&x)).unwrap();
        close(&relu6, &[0., 0., 0., 0.5, 6., f32::NAN]);
        // numpy: np.where(x < 0, np.exp(x) - 1, x) in float32.
        let elu = run1(&op("Elu", DType::F32), std::slice::from_ref(&x)).unwrap();
        close(&elu, &[-0.95021296, -0.39346933, 0., 0.5, 7., f32::NAN]);
        // numpy: np.log1p(np.exp(x)).
        let sp = run1(&op("Softplus", DType::F32), std::slice::from_ref(&x)).unwrap();
        close(&sp, &[0.04858735, 0.474077, 0.6931472, 0.974077, 7.000912, f32::NAN]);
        let ss = run1(&op("Softsign", DType::F32), std::slice::from_ref(&x)).unwrap();
        close(&ss, &[-0.75, -1. / 3., 0., 1. / 3., 0.875, f32::NAN]);
        let lr = op("LeakyRelu", DType::F32).attr("alpha", AttrValue::Float(0.1));
        let out = run1(&lr, &[x]).unwrap();
        close(&out, &[-0.3, -0.05, 0., 0.5, 7., f32::NAN]);
        let ri = run1(&op("Relu", DType::I32), &[Tensor::from_slice::<i32>([3], &[-2, 0, 5]).unwrap()]).unwrap();
        assert_eq!(ri.as_slice::<i32>().unwrap(), &[0, 0, 5]);
        assert!(run1(&op("Elu", DType::I32), &[]).is_err());
        // Softplus far out: x itself, and e^x.
        let far = f32s(&[2], &[30.0, -30.0]);
        let sp = run1(&op("Softplus", DType::F32), &[far]).unwrap();
        close(&sp, &[30.0, 9.357623e-14]);
    }

    #[test]
    fn bias_add_both_formats() {
        let value = f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let bias = f32s(&[3], &[10., 20., 30.]);
        let out = run1(&op("BiasAdd", DType::F32), &[value, bias.clone()]).unwrap();
        close(&out, &[11., 22., 33., 14., 25., 36.]);
        // NCHW [1,3,2,1]: bias along dimension 1.
        let nchw = op("BiasAdd", DType::F32).attr("data_format", AttrValue::Bytes(b"NCHW".to_vec()));
        let value = f32s(&[1, 3, 2, 1], &[1., 2., 3., 4., 5., 6.]);
        let out = run1(&nchw, &[value, bias.clone()]).unwrap();
        assert_eq!(out.dims(), &[1, 3, 2, 1]);
        close(&out, &[11., 12., 23., 24., 35., 36.]);
        let err = run1(&op("BiasAdd", DType::F32), &[f32s(&[2, 2], &[0.; 4]), bias.clone()]).unwrap_err();
        assert!(err.message.contains("[3] vs. [2,2]"), "{err}");
        let err = run1(&op("BiasAdd", DType::F32), &[f32s(&[3], &[0.; 3]), bias]).unwrap_err();
        assert!(err.message.contains("at least 2D"), "{err}");
    }

    #[test]
    fn softmax_rows() {
        let x = f32s(&[2, 3], &[1., 2., 3., 1000., 1000., 1000.]);
        let sm = run1(&op("Softmax", DType::F32), std::slice::from_ref(&x)).unwrap();
        // numpy: e = np.exp(x - x.max(-1, keepdims=True)); e / e.sum(-1, keepdims=True)
        close(&sm, &[0.09003057, 0.24472846, 0.66524094, 1. / 3., 1. / 3., 1. / 3.]);
        let lsm = run1(&op("LogSoftmax", DType::F32), &[x]).unwrap();
        close(&lsm, &[-2.407606, -1.4076059, -0.40760595, -1.0986123, -1.0986123, -1.0986123]);
        let empty = Tensor::zeros(DType::F32, [0, 4]).unwrap();
        assert_eq!(run1(&op("Softmax", DType::F32), &[empty]).unwrap().dims(), &[0, 4]);
        let err = run1(&op("Softmax", DType::F32), &[Tensor::scalar(1.0f32)]).unwrap_err();
        assert!(err.message.contains(">= 1 dimension"), "{err}");
    }

    #[test]
    fn softmax_over_the_last_axis_of_any_rank() {
        // tf.nn.softmax / tf.nn.log_softmax in TensorFlow 2.21 (float32).
        let x1 = f32s(&[4], &[1., 2., 3., 0.5]);
        let sm = run1(&op("Softmax", DType::F32), std::slice::from_ref(&x1)).unwrap();
        assert_eq!(sm.dims(), &[4]);
        close(&sm, &[0.08536889, 0.23205672, 0.63079554, 0.05177885]);
        let lsm = run1(&op("LogSoftmax", DType::F32), &[x1]).unwrap();
        close(&lsm, &[-2.4607735, -1.4607735, -0.4607735, -2.9607735]);
        let x3 = f32s(&[2, 2, 3], &[1., 2., 3., -1., 0., 1., 0.5, 0.5, 0.5, 10., -10., 0.]);
        let sm = run1(&op("Softmax", DType::F32), std::slice::from_ref(&x3)).unwrap();
        assert_eq!(sm.dims(), &[2, 2, 3]);
        close(
            &sm,
            &[
                0.09003057,
                0.24472848,
                0.66524094,
                0.09003057,
                0.24472848,
                0.66524094,
                0.33333334,
                0.33333334,
                0.33333334,
                0.9999546,
                2.06106e-9,
                4.539787e-5,
            ],
        );
        let lsm = run1(&op("LogSoftmax", DType::F32), &[x3]).unwrap();
        close(
            &lsm,
            &[
                -2.407606,
                -1.4076059,
                -0.40760595,
                -2.407606,
                -1.4076059,
                -0.40760595,
                -1.0986123,
                -1.0986123,
                -1.0986123,
                -4.5417706e-5,
                -20.000046,
                -10.000046,
            ],
        );
        let x4 = f32s(&[1, 2, 2, 2], &[-1., -0.5, 0., 0.5, 1., 1.5, 2., 2.5]);
        let sm = run1(&op("Softmax", DType::F32), std::slice::from_ref(&x4)).unwrap();
        assert_eq!(sm.dims(), &[1, 2, 2, 2]);
        close(&sm, &[0.37754068, 0.62245935].repeat(4));
        let lsm = run1(
            &op("LogSoftmax", DType::F64),
            &[Tensor::from_slice::<f64>([1, 2, 2, 2], &[-1., -0.5, 0., 0.5, 1., 1.5, 2., 2.5]).unwrap()],
        )
        .unwrap();
        assert_eq!(lsm.dims(), &[1, 2, 2, 2]);
        for (i, v) in lsm.as_slice::<f64>().unwrap().iter().enumerate() {
            // log(1 / (1 + e^±0.5)).
            let want = if i % 2 == 0 { -0.9740769841801067 } else { -0.4740769841801067 };
            assert!((v - want).abs() < 1e-15, "{i}: {v}");
        }
    }

    /// Keras's LayerNormalization as TensorFlow 2.21 freezes it, kernel by
    /// kernel: mean = Mean(x, -1, keep_dims); variance =
    /// Mean(SquaredDifference(x, StopGradient(mean)), -1, keep_dims);
    /// inv = Rsqrt(variance + eps) * gamma; out = x * inv + (beta - mean * inv)
    /// (the graph's Neg/Mul/AddV2 spelling of the last term).
    #[test]
    fn layer_norm_from_its_kernels_matches_keras() {
        let x = f32s(
            &[2, 2, 4],
            &[
                0.32299984,
                -0.10213006,
                -0.44512004,
                -0.70597005,
                -0.88468003,
                -0.98125005,
                -0.99568,
                -0.92796993,
                -0.7781199,
                -0.54612994,
                -0.23199981,
                0.1642704,
                0.6426803,
                1.2032301,
                1.8459208,
                2.5707507,
            ],
        );
        let gamma = f32s(&[1, 1, 4], &[1.5, -0.5, 2.0, 0.25]);
        let beta = f32s(&[1, 1, 4], &[0.1, 0.2, -0.3, 0.0]);
        let last = Tensor::from_slice::<i32>([1], &[-1]).unwrap();
        let mean_op = op("Mean", DType::F32).attr("keep_dims", AttrValue::Bool(true));
        let k = |name: &str, inputs: &[Tensor]| run1(&op(name, DType::F32), inputs).unwrap();
        let mean = run1(&mean_op, &[x.clone(), last.clone()]).unwrap();
        assert_eq!(mean.dims(), &[2, 2, 1]);
        let centred = k("SquaredDifference", &[x.clone(), k("StopGradient", std::slice::from_ref(&mean))]);
        assert_eq!(centred.dims(), &[2, 2, 4]);
        let variance = run1(&mean_op, &[centred, last]).unwrap();
        let inv = k("Mul", &[k("Rsqrt", &[k("AddV2", &[variance, Tensor::scalar(1e-3f32)])]), gamma]);
        assert_eq!(inv.dims(), &[2, 2, 4]);
        let shift = k("AddV2", &[k("Mul", &[k("Neg", &[mean]), inv.clone()]), beta]);
        let out = k("AddV2", &[k("Mul", &[x, inv]), shift]);
        assert_eq!(out.dims(), &[2, 2, 4]);
        // tf.keras.layers.LayerNormalization(epsilon=1e-3) with these gamma
        // and beta, in TensorFlow 2.21.
        close(
            &out,
            &[
                2.2535264,
                0.031475574,
                -1.3986356,
                -0.30585384,
                1.8328873,
                0.51181906,
                -2.0788963,
                0.08945608,
                -1.7173656,
                0.47905374,
                0.35346967,
                0.36073738,
                -1.821732,
                0.45153177,
                0.47809237,
                0.34879303,
            ],
        );
    }
}
