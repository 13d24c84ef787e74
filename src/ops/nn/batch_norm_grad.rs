//! Gradients of batch normalisation: `FusedBatchNormGrad`, `V2` and `V3`,
//! over the channel dimension of a 4-D or 5-D input (NHWC, NDHWC, NCHW,
//! NCDHW), in training and inference mode, as TensorFlow's CPU kernel
//! computes them. float32 (TensorFlow's type here); `FusedBatchNormGrad`,
//! whose operands are all `T`, also runs float64.
//!
//! Owns: these kernels. Must not hold state beyond parsed attributes.
//!
//! `reserve_space_1` and `reserve_space_2` are what the forward op left
//! there: in training the batch mean and the biased batch variance (the
//! statistics that normalised `x`); in inference the population mean and
//! variance that TensorFlow's gradient passes in their place. V3's
//! `reserve_space_3` is read by no CPU kernel and is ignored. With
//! `r = rsqrt(variance + epsilon)`, `x̂ = (x - mean) · r` and `n` the
//! elements per channel:
//! - training: `dx = scale · r · (dy - mean(dy) - x̂ · mean(dy · x̂))`,
//!   `dscale = sum(dy · x̂)`, `doffset = sum(dy)`;
//! - inference: `dx = dy · scale · r`, `dscale = sum(dy · (x - mean)) · r`,
//!   `doffset = sum(dy)`.
//!
//! Sums run in float64 and are rounded once. The last two outputs are
//! empty, as on TensorFlow's CPU.

use super::batch_norm::{Layout, channels_last};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::math::FLOAT;
use crate::ops::numeric::{Float, Num};
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, unsupported_dtype};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("FusedBatchNormGrad", v1_signature, build_grad),
    OpDef::kernel("FusedBatchNormGradV2", signature_with_u::<5>, build_grad),
    OpDef::kernel("FusedBatchNormGradV3", signature_with_u::<6>, build_grad),
];

/// V1: every operand is T.
fn v1_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t; 5], vec![t; 5]))
}

/// `y_backprop: T, x: T, scale: float`, then `INPUTS - 3` U reserve
/// spaces in; `x_backprop: T` and four U out.
fn signature_with_u<const INPUTS: usize>(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let u = ValueType::Tensor(node.attr_dtype("U")?);
    let mut inputs = vec![t, t, ValueType::Tensor(DType::F32)];
    inputs.resize(INPUTS, u);
    Ok(OpSignature::new(inputs, vec![t, u, u, u, u]))
}

type GradFn = fn(&BatchNormGrad, &mut OpContext<'_>) -> Result<()>;

struct BatchNormGrad {
    epsilon: f64,
    is_training: bool,
    channels_last: bool,
    compute: GradFn,
}

fn build_grad(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = node.attr_dtype("T")?;
    let compute: GradFn = if node.op == "FusedBatchNormGrad" {
        match dtype {
            DType::F32 => grad::<f32>,
            DType::F64 => grad::<f64>,
            _ => return Err(unsupported_dtype(&node.op, dtype, FLOAT)),
        }
    } else {
        for key in ["T", "U"] {
            let d = node.attr_dtype(key)?;
            if d != DType::F32 {
                return Err(unsupported_dtype(&node.op, d, &[DType::F32]));
            }
        }
        grad::<f32>
    };
    Ok(Box::new(BatchNormGrad {
        epsilon: node.attr_float_or("epsilon", 0.0001)? as f64,
        is_training: node.attr_bool_or("is_training", true)?,
        channels_last: channels_last(node)?,
        compute,
    }))
}

impl OpKernel for BatchNormGrad {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        (self.compute)(self, ctx)
    }
}

/// Calls `f(channel, index)` for every element of a tensor of `layout`, in
/// memory order, without a division per element.
#[inline(always)]
fn each_element(layout: Layout, mut f: impl FnMut(usize, usize)) {
    let c = layout.channels;
    if layout.inner == 1 {
        for base in (0..layout.outer).map(|p| p * c) {
            (0..c).for_each(|ch| f(ch, base + ch));
        }
    } else {
        for run in 0..layout.outer * c {
            let start = run * layout.inner;
            (start..start + layout.inner).for_each(|i| f(run % c, i));
        }
    }
}

fn grad<T: Float>(k: &BatchNormGrad, ctx: &mut OpContext<'_>) -> Result<()> {
    let (dy_t, x_t) = (ctx.input(0)?, ctx.input(1)?);
    let layout = Layout::of(dy_t, k.channels_last)?;
    Layout::of(x_t, k.channels_last)?;
    if dy_t.dims() != x_t.dims() {
        bail!(
            invalid_argument,
            "x and y_backprop must have same shape, but x has shape {} and y_backprop has shape {}",
            x_t.shape(),
            dy_t.shape()
        );
    }
    let c = layout.channels;
    let names = ["scale", "reserve_space_1", "reserve_space_2"];
    for (i, name) in names.iter().enumerate() {
        let t = ctx.input(i + 2)?;
        if t.rank() != 1 {
            bail!(invalid_argument, "{name} must be 1-dimensional: {}", t.shape());
        }
        if t.num_elements() != c {
            bail!(
                invalid_argument,
                "{name} must have the same number of elements as the channels of x, got {} and {c}",
                t.num_elements()
            );
        }
    }
    let (dy, x) = (dy_t.as_slice::<T>()?, x_t.as_slice::<T>()?);
    let (scale, mean, variance) =
        (ctx.input(2)?.as_slice::<T>()?, ctx.input(3)?.as_slice::<T>()?, ctx.input(4)?.as_slice::<T>()?);
    let epsilon = T::from_f64(k.epsilon);
    let rsqrt: Vec<T> = variance.iter().map(|&v| T::ONE.div(v.add(epsilon).sqrt())).collect();
    let mut sum_dy = vec![<T::Acc as Num>::ZERO; c];
    // Training: sum(dy · x̂); inference: sum(dy · (x - mean)).
    let mut sum_dy_x = vec![<T::Acc as Num>::ZERO; c];
    let centred = |ch: usize, i: usize| x[i].sub(mean[ch]);
    each_element(layout, |ch, i| {
        let xc = if k.is_training { centred(ch, i).mul(rsqrt[ch]) } else { centred(ch, i) };
        sum_dy[ch] = sum_dy[ch].add(dy[i].widen());
        sum_dy_x[ch] = sum_dy_x[ch].add(dy[i].widen().mul(xc.widen()));
    });
    let offset_backprop: Vec<T> = sum_dy.iter().map(|&s| T::narrow(s)).collect();
    let scale_backprop: Vec<T> = if k.is_training {
        sum_dy_x.iter().map(|&s| T::narrow(s)).collect()
    } else {
        sum_dy_x.iter().zip(&rsqrt).map(|(&s, &r)| T::narrow(s).mul(r)).collect()
    };
    let coef1: Vec<T> = scale.iter().zip(&rsqrt).map(|(&s, &r)| s.mul(r)).collect();
    let dx = if k.is_training {
        let count = layout.outer * layout.inner;
        let inverse = T::ONE.div(T::from_usize(count));
        let dy_mean: Vec<T> = offset_backprop.iter().map(|&s| s.mul(inverse)).collect();
        let coef2: Vec<T> = scale_backprop.iter().map(|&s| s.mul(inverse)).collect();
        Tensor::build::<T>(x_t.shape().clone(), |dx| {
            each_element(layout, |ch, i| {
                let scaled = centred(ch, i).mul(rsqrt[ch]);
                dx[i] = coef1[ch].mul(dy[i].sub(dy_mean[ch]).sub(scaled.mul(coef2[ch])));
            })
        })?
    } else {
        Tensor::build::<T>(x_t.shape().clone(), |dx| each_element(layout, |ch, i| dx[i] = dy[i].mul(coef1[ch])))?
    };
    ctx.set_output(0, dx);
    ctx.set_output(1, Tensor::from_slice::<T>([c], &scale_backprop)?);
    ctx.set_output(2, Tensor::from_slice::<T>([c], &offset_backprop)?);
    ctx.set_output(3, Tensor::zeros(T::DTYPE, [0])?);
    ctx.set_output(4, Tensor::zeros(T::DTYPE, [0])?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, ty};
    use crate::ops::{ResourceMgr, Value, run_kernel_once};

    fn grad_node(op: &str, training: bool) -> NodeSpec {
        let mut n = node(op)
            .attr("T", ty(DType::F32))
            .attr("epsilon", AttrValue::Float(0.001))
            .attr("is_training", AttrValue::Bool(training));
        if op != "FusedBatchNormGrad" {
            n = n.attr("U", ty(DType::F32));
        }
        n
    }

    fn f32s(dims: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(dims, v).unwrap()
    }

    /// NHWC `[2, 2, 3, 3]` as `[n][h][w][c]` index → the NCHW position.
    fn to_nchw(v: &[f32]) -> Vec<f32> {
        let mut t = vec![0.0; 36];
        for (i, &value) in v.iter().enumerate() {
            let (n, h, w, c) = (i / 18, i / 9 % 2, i / 3 % 3, i % 3);
            t[((n * 3 + c) * 2 + h) * 3 + w] = value;
        }
        t
    }

    /// The forward tests' input: `ramp / 4 + 0.3`, `[2, 2, 3, 3]`.
    fn x_values() -> Vec<f32> {
        (0..36).map(|i| (((i * 7) % 11) as f32 - 5.0) / 4.0 + 0.3).collect()
    }

    /// The gradient fed back: `(ramp(.., 5, 3, 9, 4)) / 3`.
    fn dy_values() -> Vec<f32> {
        (0..36).map(|i| (((i * 5 + 3) % 9) as f32 - 4.0) / 3.0).collect()
    }

    const SCALE: [f32; 3] = [1., 2., 0.5];
    /// The forward op's reserve spaces in training (TensorFlow's batch mean
    /// and biased variance of `x_values`).
    const BATCH_MEAN: [f32; 3] = [0.19583337, 0.34166667, 0.25833333];
    const BATCH_VARIANCE: [f32; 3] = [0.69227433, 0.5920139, 0.59201396];
    const POPULATION_MEAN: [f32; 3] = [0.1, -0.2, 0.3];
    const POPULATION_VARIANCE: [f32; 3] = [1., 0.5, 2.];

    fn run(n: &NodeSpec, dy: Tensor, x: Tensor, stats: [[f32; 3]; 3]) -> Result<Vec<Tensor>> {
        let mut inputs = vec![Value::Tensor(dy), Value::Tensor(x)];
        inputs.extend(stats.iter().map(|s| Value::Tensor(f32s(&[3], s))));
        if n.op == "FusedBatchNormGradV3" {
            inputs.push(Value::Tensor(Tensor::scalar(0f32)));
        }
        let outs = run_kernel_once(n, inputs, &ResourceMgr::default())?;
        outs.into_iter().map(Value::into_tensor).collect()
    }

    fn close(got: &Tensor, want: &[f32], what: &str) {
        let want = f32s(got.dims(), want);
        got.all_close(&want, 1e-5, 1e-6).unwrap_or_else(|e| panic!("{what}: {e}"));
    }

    // Expected values: TensorFlow 2.21's FusedBatchNormGradV3 on CPU, fed
    // the reserve spaces of its own FusedBatchNormV3 (training) or the
    // population statistics (inference), epsilon 0.001.
    #[rustfmt::skip]
    #[allow(clippy::excessive_precision)] // as TensorFlow printed them
    const TRAINING_DX: [f32; 36] = [
        -0.16541794, 2.72261, -0.041818913, -1.0055183, 0.057025742, -0.71391743, 1.3604149, -2.6085584, 0.5618487,
        0.12331148, 2.517317, -0.11024987, -1.1137919, -0.1482672, -0.5314350, 1.2521415, -2.813851, 0.74433124,
        0.015037952, 2.3120241, 0.07223267, -1.2220653, -0.35356015, -0.59986585, 1.1438679, -2.2664034, 0.67590034,
        -0.09323559, 2.859472, 0.0038017218, -1.330339, 0.1938877, -0.6682968, 1.0355943, -2.4716964, 0.6074693,
    ];
    const TRAINING_DSCALE: [f32; 3] = [-1.2010121, -0.97393274, -1.2985764];
    const DOFFSET: [f32; 3] = [-3.9999998, 4.0000005, 0.0];

    #[test]
    fn training_gradient_matches_tensorflow() {
        let stats = [SCALE, BATCH_MEAN, BATCH_VARIANCE];
        for op in ["FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3"] {
            let outs =
                run(&grad_node(op, true), f32s(&[2, 2, 3, 3], &dy_values()), f32s(&[2, 2, 3, 3], &x_values()), stats)
                    .unwrap();
            assert_eq!(outs.len(), 5);
            assert_eq!(outs[0].dims(), &[2, 2, 3, 3]);
            close(&outs[0], &TRAINING_DX, op);
            close(&outs[1], &TRAINING_DSCALE, op);
            close(&outs[2], &DOFFSET, op);
            // reserve_space_4 and 5: empty, as on TensorFlow's CPU.
            assert_eq!((outs[3].dims(), outs[4].dims()), (&[0][..], &[0][..]), "{op}");
        }
        // NCHW: the same numbers, transposed.
        let n = grad_node("FusedBatchNormGradV3", true).attr("data_format", AttrValue::Bytes(b"NCHW".to_vec()));
        let outs =
            run(&n, f32s(&[2, 3, 2, 3], &to_nchw(&dy_values())), f32s(&[2, 3, 2, 3], &to_nchw(&x_values())), stats)
                .unwrap();
        close(&outs[0], &to_nchw(&TRAINING_DX), "NCHW dx");
        close(&outs[1], &TRAINING_DSCALE, "NCHW dscale");
        close(&outs[2], &DOFFSET, "NCHW doffset");
    }

    #[test]
    fn inference_gradient_matches_tensorflow() {
        let stats = [SCALE, POPULATION_MEAN, POPULATION_VARIANCE];
        let outs = run(
            &grad_node("FusedBatchNormGradV3", false),
            f32s(&[2, 2, 3, 3], &dy_values()),
            f32s(&[2, 2, 3, 3], &x_values()),
            stats,
        )
        .unwrap();
        // dy repeats every 9 elements and so does dy · scale · r.
        let period =
            [-0.3331668, 3.7674708, 0.0, -1.3326672, 0.9418677, -0.35346505, 0.6663336, -1.8837354, 0.35346505];
        close(&outs[0], &period.repeat(4), "dx");
        close(&outs[1], &[-1.382642, 2.0014687, -0.7069301], "dscale");
        close(&outs[2], &DOFFSET, "doffset");
    }

    /// A batch normalisation in f64, the definition the gradient is checked
    /// against: `(y, batch mean, biased batch variance)`.
    fn forward(
        x: &[f64],
        scale: &[f64],
        offset: &[f64],
        stats: Option<(&[f64], &[f64])>,
    ) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let c = scale.len();
        let count = (x.len() / c) as f64;
        let (mean, var) = match stats {
            Some((m, v)) => (m.to_vec(), v.to_vec()),
            None => {
                let mean: Vec<f64> = (0..c).map(|ch| x.iter().skip(ch).step_by(c).sum::<f64>() / count).collect();
                let var = (0..c)
                    .map(|ch| x.iter().skip(ch).step_by(c).map(|v| (v - mean[ch]).powi(2)).sum::<f64>() / count)
                    .collect();
                (mean, var)
            }
        };
        let y = x
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let ch = i % c;
                (v - mean[ch]) / (var[ch] + 0.001).sqrt() * scale[ch] + offset[ch]
            })
            .collect();
        (y, mean, var)
    }

    /// Central differences of ⟨forward(x), dy⟩ against the float64 kernel
    /// (FusedBatchNormGrad, whose operands are all T), in both modes.
    #[test]
    fn float64_gradients_agree_with_finite_differences() {
        let dims = [2, 3, 2, 4];
        let len = 48;
        let x: Vec<f64> = (0..len).map(|i| ((i * 37 % 23) as f64) / 7.0 - 1.5).collect();
        let dy: Vec<f64> = (0..len).map(|i| ((i * 11 % 13) as f64) / 5.0 - 1.2).collect();
        let scale = [0.5, -1.5, 2.0, 1.0];
        let offset = [0.1, 0.2, -0.3, 0.0];
        let population = ([0.2, -0.1, 0.4, 0.0], [0.8, 1.3, 0.5, 2.0]);
        for training in [true, false] {
            let stats = if training { None } else { Some((&population.0[..], &population.1[..])) };
            let loss = |x: &[f64], scale: &[f64], offset: &[f64]| -> f64 {
                forward(x, scale, offset, stats).0.iter().zip(&dy).map(|(a, b)| a * b).sum()
            };
            let (_, mean, var) = forward(&x, &scale, &offset, stats);
            let n = node("FusedBatchNormGrad")
                .attr("T", ty(DType::F64))
                .attr("epsilon", AttrValue::Float(0.001))
                .attr("is_training", AttrValue::Bool(training));
            let t = |dims: &[usize], v: &[f64]| Value::Tensor(Tensor::from_slice::<f64>(dims, v).unwrap());
            let inputs = vec![t(&dims, &dy), t(&dims, &x), t(&[4], &scale), t(&[4], &mean), t(&[4], &var)];
            let outs = run_kernel_once(&n, inputs, &ResourceMgr::default()).unwrap();
            let got: Vec<Vec<f64>> = outs.iter().take(3).map(|o| o.as_tensor().unwrap().to_f64_vec()).collect();
            let h = 1e-6;
            let nudge = |v: &[f64], i: usize, by: f64| {
                let mut v = v.to_vec();
                v[i] += by;
                v
            };
            for (i, &kernel) in got[0].iter().enumerate() {
                let numeric =
                    (loss(&nudge(&x, i, h), &scale, &offset) - loss(&nudge(&x, i, -h), &scale, &offset)) / (2.0 * h);
                assert!((numeric - kernel).abs() < 1e-6, "training {training}: dx[{i}] {numeric} vs {kernel}");
            }
            for (ch, (&dscale, &doffset)) in got[1].iter().zip(&got[2]).enumerate() {
                let numeric =
                    (loss(&x, &nudge(&scale, ch, h), &offset) - loss(&x, &nudge(&scale, ch, -h), &offset)) / (2.0 * h);
                assert!((numeric - dscale).abs() < 1e-6, "training {training}: dscale[{ch}]");
                let numeric =
                    (loss(&x, &scale, &nudge(&offset, ch, h)) - loss(&x, &scale, &nudge(&offset, ch, -h))) / (2.0 * h);
                assert!((numeric - doffset).abs() < 1e-6, "training {training}: doffset[{ch}]");
            }
        }
    }

    #[test]
    fn empty_inputs_and_errors() {
        let n = grad_node("FusedBatchNormGradV3", true);
        let stats = [SCALE, BATCH_MEAN, BATCH_VARIANCE];
        let empty = || Tensor::zeros(DType::F32, [0, 2, 2, 3]).unwrap();
        let outs = run(&n, empty(), empty(), stats).unwrap();
        assert_eq!(outs[0].dims(), &[0, 2, 2, 3]);
        assert_eq!(outs[1].as_slice::<f32>().unwrap(), &[0.; 3]);
        assert_eq!(outs[2].as_slice::<f32>().unwrap(), &[0.; 3]);
        let x = || f32s(&[2, 2, 3, 3], &x_values());
        let msg = |dy: Tensor, x: Tensor, stats| run(&n, dy, x, stats).unwrap_err().into_message();
        assert_eq!(
            msg(f32s(&[1, 2, 3, 3], &x_values()[..18]), x(), stats),
            "x and y_backprop must have same shape, but x has shape [2,2,3,3] and y_backprop has shape [1,2,3,3]"
        );
        assert_eq!(msg(f32s(&[2, 2, 9], &x_values()), x(), stats), "input must be 4 or 5-dimensional: [2,2,9]");
        let mut inputs: Vec<Value> =
            [x(), x(), f32s(&[2], &[1., 2.]), f32s(&[3], &BATCH_MEAN), f32s(&[3], &BATCH_VARIANCE)]
                .into_iter()
                .map(Value::Tensor)
                .collect();
        inputs.push(Value::Tensor(Tensor::scalar(0f32)));
        let e = run_kernel_once(&n, inputs.clone(), &ResourceMgr::default()).unwrap_err();
        assert_eq!(e.message, "scale must have the same number of elements as the channels of x, got 2 and 3");
        inputs.swap(2, 3);
        let e = run_kernel_once(&n, inputs, &ResourceMgr::default()).unwrap_err();
        assert_eq!(
            e.message,
            "reserve_space_1 must have the same number of elements as the channels of x, got 2 and 3"
        );
        let build = |n: NodeSpec| run_kernel_once(&n, vec![], &ResourceMgr::default()).unwrap_err().into_message();
        assert!(
            build(n.clone().attr("T", ty(DType::F64))).contains("FusedBatchNormGradV3 does not support dtype float64")
        );
        assert!(
            build(grad_node("FusedBatchNormGrad", true).attr("T", ty(DType::I32)))
                .contains("does not support dtype int32")
        );
        assert!(
            build(n.clone().attr("data_format", AttrValue::Bytes(b"HWCN".to_vec()))).contains("Invalid data format")
        );
    }
}
