//! FusedBatchNorm, FusedBatchNormV2 and FusedBatchNormV3: batch
//! normalisation over the channel dimension of a 4-D or 5-D input, the
//! last one (NHWC, NDHWC) or dimension 1 (NCHW, NCDHW), float32 (T may be
//! float32, half or bfloat16 in TensorFlow, U float32; the 16-bit floats
//! are computed in float32 by `ops::widen`).
//!
//! Owns: these kernels. Must not hold state beyond parsed attributes.
//!
//! Inference (`is_training = false`, what frozen graphs carry):
//! `y = (x - mean) * (rsqrt(variance + epsilon) * scale) + offset`, with
//! `batch_mean` and `batch_variance` passing `mean` and `variance` through.
//! TensorFlow leaves `reserve_space_1/2` uninitialised in inference; here
//! they repeat mean and variance, so results are deterministic.
//!
//! Training (`is_training = true`, the attribute's default): the batch's
//! mean and biased variance (summed in f64) normalise `x`; `batch_variance`
//! is the Bessel-corrected variance (`n / (n - 1)`, `n` the elements per
//! channel, unchanged for `n = 1`), and with `exponential_avg_factor` `f`
//! other than 1 both running outputs are `(1 - f) * old + f * batch`.
//! `reserve_space_1/2` are the batch mean and biased variance. An empty
//! input gives NaN statistics, as TensorFlow does.
//!
//! V3's `reserve_space_3` is a float32 scalar 0, as TensorFlow's CPU kernel
//! gives it.

use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, unsupported_dtype};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("FusedBatchNorm", v1_signature, build_fused_batch_norm),
    OpDef::kernel("FusedBatchNormV2", v2_signature, build_fused_batch_norm),
    OpDef::kernel("FusedBatchNormV3", v3_signature, build_fused_batch_norm),
];

const TYPES: &[DType] = &[DType::F32];

/// V1: every operand is T.
fn v1_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t; 5], vec![t; 5]))
}

/// `x: T`, four `U` statistics in, `y: T` and `outputs - 1` U out.
fn signature_with_u(node: &NodeSpec, outputs: usize) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let u = ValueType::Tensor(node.attr_dtype("U")?);
    let mut out = vec![t];
    out.resize(outputs, u);
    Ok(OpSignature::new(vec![t, u, u, u, u], out))
}

fn v2_signature(node: &NodeSpec) -> Result<OpSignature> {
    signature_with_u(node, 5)
}

fn v3_signature(node: &NodeSpec) -> Result<OpSignature> {
    signature_with_u(node, 6)
}

struct FusedBatchNormKernel {
    epsilon: f32,
    exponential_avg_factor: f32,
    is_training: bool,
    channels_last: bool,
    /// 6 for V3 (with `reserve_space_3`), 5 before.
    outputs: usize,
}

fn build_fused_batch_norm(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    for key in ["T", "U"] {
        if key == "U" && node.op == "FusedBatchNorm" {
            continue;
        }
        let dtype = node.attr_dtype(key)?;
        if dtype != DType::F32 {
            return Err(unsupported_dtype(&node.op, dtype, TYPES));
        }
    }
    let channels_last = channels_last(node)?;
    Ok(Box::new(FusedBatchNormKernel {
        epsilon: node.attr_float_or("epsilon", 0.0001)?,
        exponential_avg_factor: node.attr_float_or("exponential_avg_factor", 1.0)?,
        is_training: node.attr_bool_or("is_training", true)?,
        channels_last,
        outputs: init.signature.outputs.len(),
    }))
}

/// Per-channel statistics of one call.
struct Stats {
    /// What normalises `x`: the given or the batch's mean and variance.
    mean: Vec<f32>,
    variance: Vec<f32>,
    /// Outputs 1 to 4.
    batch_mean: Vec<f32>,
    batch_variance: Vec<f32>,
    reserve_1: Vec<f32>,
    reserve_2: Vec<f32>,
}

/// Whether the node's `data_format` puts channels last (NHWC, NDHWC) or
/// at dimension 1 (NCHW, NCDHW).
pub(super) fn channels_last(node: &NodeSpec) -> Result<bool> {
    match node.attr_str_or("data_format", "NHWC")?.as_str() {
        "NHWC" | "NDHWC" => Ok(true),
        "NCHW" | "NCDHW" => Ok(false),
        other => bail!(invalid_argument, "Invalid data format: {other}"),
    }
}

/// `x` as `[outer, channels, inner]`: for channels-last `inner` is 1.
#[derive(Clone, Copy)]
pub(super) struct Layout {
    pub outer: usize,
    pub channels: usize,
    pub inner: usize,
}

impl Layout {
    /// The layout of a 4-D or 5-D `x`.
    pub fn of(x: &Tensor, channels_last: bool) -> Result<Layout> {
        let dims = x.dims();
        if dims.len() != 4 && dims.len() != 5 {
            bail!(invalid_argument, "input must be 4 or 5-dimensional: {}", x.shape());
        }
        let channel_dim = if channels_last { dims.len() - 1 } else { 1 };
        Ok(Layout {
            outer: dims[..channel_dim].iter().product(),
            channels: dims[channel_dim],
            inner: dims[channel_dim + 1..].iter().product(),
        })
    }

    /// `acc[c] += f(c, v)` over every element `v` of channel `c`.
    fn per_channel_sum(&self, x: &[f32], f: impl Fn(usize, f32) -> f64) -> Vec<f64> {
        let mut acc = vec![0f64; self.channels];
        if self.inner == 1 {
            for pixel in x.chunks_exact(self.channels) {
                for (ch, (a, &v)) in acc.iter_mut().zip(pixel).enumerate() {
                    *a += f(ch, v);
                }
            }
        } else {
            for (i, run) in x.chunks_exact(self.inner).enumerate() {
                let ch = i % self.channels;
                acc[ch] += run.iter().map(|&v| f(ch, v)).sum::<f64>();
            }
        }
        acc
    }

    /// `v = (v - mean[c]) * factor[c] + offset[c]` over `x`.
    fn normalise(&self, x: &mut [f32], mean: &[f32], factor: &[f32], offset: &[f32]) {
        if self.inner == 1 {
            for pixel in x.chunks_exact_mut(self.channels) {
                for (((v, &m), &f), &o) in pixel.iter_mut().zip(mean).zip(factor).zip(offset) {
                    *v = (*v - m) * f + o;
                }
            }
        } else {
            for (i, run) in x.chunks_exact_mut(self.inner).enumerate() {
                let ch = i % self.channels;
                let (m, f, o) = (mean[ch], factor[ch], offset[ch]);
                run.iter_mut().for_each(|v| *v = (*v - m) * f + o);
            }
        }
    }
}

impl FusedBatchNormKernel {
    fn layout(&self, x: &Tensor) -> Result<Layout> {
        Layout::of(x, self.channels_last)
    }

    fn batch_stats(&self, x: &[f32], layout: Layout, mean: &[f32], variance: &[f32]) -> Stats {
        let c = layout.channels;
        let count = layout.outer * layout.inner;
        if count == 0 {
            let nan = vec![f32::NAN; c];
            return Stats {
                mean: nan.clone(),
                variance: nan.clone(),
                batch_mean: nan.clone(),
                batch_variance: nan.clone(),
                reserve_1: nan.clone(),
                reserve_2: nan,
            };
        }
        // Two passes in f64: the mean, then squared deviations from it.
        let sum = layout.per_channel_sum(x, |_, v| v as f64);
        let mean64: Vec<f64> = sum.iter().map(|s| s / count as f64).collect();
        let squares = layout.per_channel_sum(x, |ch, v| (v as f64 - mean64[ch]) * (v as f64 - mean64[ch]));
        let biased: Vec<f64> = squares.iter().map(|s| s / count as f64).collect();
        let correction = count as f64 / (count.max(2) - 1) as f64;
        let f = self.exponential_avg_factor as f64;
        let running = |old: &[f32], batch: f64, ch: usize| {
            if f == 1.0 { batch as f32 } else { ((1.0 - f) * old[ch] as f64 + f * batch) as f32 }
        };
        let batch_mean = (0..c).map(|ch| running(mean, mean64[ch], ch)).collect();
        let batch_variance = (0..c).map(|ch| running(variance, biased[ch] * correction, ch)).collect();
        let mean: Vec<f32> = mean64.iter().map(|&m| m as f32).collect();
        let variance: Vec<f32> = biased.iter().map(|&v| v as f32).collect();
        Stats { reserve_1: mean.clone(), reserve_2: variance.clone(), mean, variance, batch_mean, batch_variance }
    }
}

impl OpKernel for FusedBatchNormKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let x = ctx.take_input(0)?;
        let layout = self.layout(&x)?;
        let names = ["scale", "offset", "estimated_mean", "estimated_variance"];
        for (i, name) in names.iter().enumerate() {
            let t = ctx.input(i + 1)?;
            if t.rank() != 1 {
                bail!(invalid_argument, "{name} must be 1-dimensional: {}", t.shape());
            }
        }
        let c = layout.channels;
        let (scale, offset) = (ctx.input(1)?.as_slice::<f32>()?, ctx.input(2)?.as_slice::<f32>()?);
        let (mean, variance) = (ctx.input(3)?.as_slice::<f32>()?, ctx.input(4)?.as_slice::<f32>()?);
        for (name, len) in [("scale", scale.len()), ("offset", offset.len())] {
            if len != c {
                bail!(
                    invalid_argument,
                    "{name} must have the same number of elements as the channels of x, got {len} and {c}"
                );
            }
        }
        if !self.is_training || self.exponential_avg_factor != 1.0 {
            let prefix = if self.is_training { "When exponential_avg_factor != 1" } else { "When is_training=false" };
            for (name, len) in [("mean", mean.len()), ("variance", variance.len())] {
                if len != c {
                    bail!(
                        invalid_argument,
                        "{prefix}, {name} must have the same number of elements as the channels of x, got {len} and {c}"
                    );
                }
            }
        }
        let stats = if self.is_training {
            self.batch_stats(x.as_slice::<f32>()?, layout, mean, variance)
        } else if x.num_elements() == 0 {
            let nan = vec![f32::NAN; c];
            let (mean, variance) = (mean.to_vec(), variance.to_vec());
            Stats {
                batch_mean: nan.clone(),
                batch_variance: nan,
                reserve_1: mean.clone(),
                reserve_2: variance.clone(),
                mean,
                variance,
            }
        } else {
            Stats {
                batch_mean: mean.to_vec(),
                batch_variance: variance.to_vec(),
                reserve_1: mean.to_vec(),
                reserve_2: variance.to_vec(),
                mean: mean.to_vec(),
                variance: variance.to_vec(),
            }
        };
        // y = (x - mean) * factor + offset, factor = rsqrt(var + eps) * scale.
        let factor: Vec<f32> =
            stats.variance.iter().zip(scale).map(|(&v, &s)| (1.0 / (v + self.epsilon).sqrt()) * s).collect();
        let mut y = x;
        if y.try_slice_mut::<f32>().is_none() {
            y = y.deep_copy();
        }
        match y.try_slice_mut::<f32>() {
            Some(values) => layout.normalise(values, &stats.mean, &factor, offset),
            None => bail!(internal, "FusedBatchNorm: a fresh copy is not writable"),
        }
        ctx.set_output(0, y);
        let vector = |v: Vec<f32>| Tensor::from_slice::<f32>([c], &v);
        ctx.set_output(1, vector(stats.batch_mean)?);
        ctx.set_output(2, vector(stats.batch_variance)?);
        ctx.set_output(3, vector(stats.reserve_1)?);
        ctx.set_output(4, vector(stats.reserve_2)?);
        if self.outputs == 6 {
            ctx.set_output(5, Tensor::scalar(0f32));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, ty};
    use crate::ops::{ResourceMgr, Value, run_kernel_once};

    fn bn(op: &str, training: bool) -> NodeSpec {
        let mut n = node(op)
            .attr("T", ty(DType::F32))
            .attr("epsilon", AttrValue::Float(0.001))
            .attr("is_training", AttrValue::Bool(training));
        if op != "FusedBatchNorm" {
            n = n.attr("U", ty(DType::F32));
        }
        n
    }

    fn nchw(n: NodeSpec) -> NodeSpec {
        n.attr("data_format", AttrValue::Bytes(b"NCHW".to_vec()))
    }

    fn f32s(dims: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice::<f32>(dims, v).unwrap()
    }

    /// The test input, `[2, 2, 3, 3]` NHWC (or its NCHW transpose):
    /// `ramp / 4 + 0.3` in float32, as fed to TensorFlow.
    fn x(nchw: bool) -> Tensor {
        let v: Vec<f32> = (0..36).map(|i| (((i * 7) % 11) as f32 - 5.0) / 4.0 + 0.3).collect();
        if !nchw {
            return f32s(&[2, 2, 3, 3], &v);
        }
        let mut t = vec![0.0; 36];
        for (i, &value) in v.iter().enumerate() {
            let (n, h, w, c) = (i / 18, i / 9 % 2, i / 3 % 3, i % 3);
            t[((n * 3 + c) * 2 + h) * 3 + w] = value;
        }
        f32s(&[2, 3, 2, 3], &t)
    }

    /// scale, offset, mean, variance.
    fn stats() -> [Tensor; 4] {
        [
            f32s(&[3], &[1., 2., 0.5]),
            f32s(&[3], &[0., 1., -1.]),
            f32s(&[3], &[0.1, -0.2, 0.3]),
            f32s(&[3], &[1., 0.5, 2.]),
        ]
    }

    fn run(n: &NodeSpec, x: Tensor, stats: [Tensor; 4]) -> Result<Vec<Tensor>> {
        let mut inputs = vec![Value::Tensor(x)];
        inputs.extend(stats.into_iter().map(Value::Tensor));
        let outs = run_kernel_once(n, inputs, &ResourceMgr::default())?;
        outs.into_iter().map(Value::into_tensor).collect()
    }

    fn close(got: &Tensor, want: &[f32], what: &str) {
        let want = f32s(got.dims(), want);
        got.all_close(&want, 1e-5, 1e-6).unwrap_or_else(|e| panic!("{what}: {e}"));
    }

    // Expected values: TensorFlow 2.21's FusedBatchNormV3 on CPU.
    const INFERENCE_Y: [f32; 36] = [
        -1.0494753,
        3.825603,
        -1.1767325,
        1.4492755,
        3.119202,
        -1.2650988,
        1.1994004,
        2.4128015,
        -1.3534651,
        0.9495253,
        1.7064008,
        -1.4418314,
        0.6996503,
        1.0,
        -0.55816865,
        0.4497752,
        0.2935993,
        -0.646535,
        0.1999001,
        -0.4128015,
        -0.7349012,
        -0.049975008,
        -1.1192021,
        -0.82326746,
        -0.2998501,
        5.944805,
        -0.9116337,
        -0.54972523,
        5.2384043,
        -1.0,
        -0.7996003,
        4.532004,
        -1.0883663,
        -1.0494753,
        3.825603,
        -1.1767325,
    ];

    #[test]
    fn inference_matches_tensorflow() {
        for op in ["FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"] {
            let outs = run(&bn(op, false), x(false), stats()).unwrap();
            assert_eq!(outs.len(), if op == "FusedBatchNormV3" { 6 } else { 5 });
            assert_eq!(outs[0].dims(), &[2, 2, 3, 3]);
            close(&outs[0], &INFERENCE_Y, op);
            for (i, want) in [(1, [0.1, -0.2, 0.3]), (2, [1., 0.5, 2.]), (3, [0.1, -0.2, 0.3]), (4, [1., 0.5, 2.])] {
                assert_eq!(outs[i].as_slice::<f32>().unwrap(), &want, "{op} output {i}");
            }
            if op == "FusedBatchNormV3" {
                assert!(outs[5].shape().is_scalar(), "reserve_space_3 is a scalar, as on TensorFlow's CPU");
            }
        }
        // NCHW: the same numbers, transposed.
        let outs = run(&nchw(bn("FusedBatchNormV3", false)), x(true), stats()).unwrap();
        let want = [
            -1.0494753,
            1.4492755,
            1.1994004,
            0.9495253,
            0.6996503,
            0.4497752,
            3.825603,
            3.119202,
            2.4128015,
            1.7064008,
            1.0,
            0.2935993,
            -1.1767325,
            -1.2650988,
            -1.3534651,
            -1.4418314,
            -0.55816865,
            -0.646535,
            0.1999001,
            -0.049975008,
            -0.2998501,
            -0.54972523,
            -0.7996003,
            -1.0494753,
            -0.4128015,
            -1.1192021,
            5.944805,
            5.2384043,
            4.532004,
            3.825603,
            -0.7349012,
            -0.82326746,
            -0.9116337,
            -1.0,
            -1.0883663,
            -1.1767325,
        ];
        assert_eq!(outs[0].dims(), &[2, 3, 2, 3]);
        close(&outs[0], &want, "NCHW");
        // 5-D NHWC is channels-last (NDHWC), as TensorFlow reads it.
        let five = x(false).reshaped([1, 2, 2, 3, 3]).unwrap();
        let outs = run(&bn("FusedBatchNormV3", false), five, stats()).unwrap();
        close(&outs[0], &INFERENCE_Y, "5-D");
        // Negative variance: NaN, as rsqrt gives.
        let [s, o, m, v] = stats();
        let neg = f32s(&[3], &v.as_slice::<f32>().unwrap().iter().map(|v| -v).collect::<Vec<_>>());
        let outs = run(&bn("FusedBatchNormV3", false), x(false), [s, o, m, neg]).unwrap();
        assert!(outs[0].as_slice::<f32>().unwrap().iter().all(|v| v.is_nan()));
    }

    #[test]
    fn training_matches_tensorflow() {
        let n = bn("FusedBatchNormV3", true).attr("exponential_avg_factor", AttrValue::Float(0.25));
        let outs = run(&n, x(false), stats()).unwrap();
        let want_y = [
            -1.3761599,
            2.190362,
            -1.2975905,
            1.6263707,
            1.5410737,
            -1.4599125,
            1.3261176,
            0.8917853,
            -1.6222346,
            1.0258645,
            0.24249697,
            -1.7845566,
            0.7256115,
            -0.40679133,
            -0.16133606,
            0.42535844,
            -1.0560796,
            -0.3236581,
            0.12510541,
            -1.705368,
            -0.48598015,
            -0.17514765,
            -2.3546565,
            -0.6483022,
            -0.47540075,
            4.1382265,
            -0.81062424,
            -0.7756538,
            3.4889386,
            -0.9729463,
            -1.0759069,
            2.8396502,
            -1.1352683,
            -1.3761599,
            2.190362,
            -1.2975905,
        ];
        close(&outs[0], &want_y, "y");
        close(&outs[1], &[0.12395835, -0.06458334, 0.28958333], "running mean");
        close(&outs[2], &[0.9388021, 0.5364583, 1.6614584], "running variance (Bessel-corrected)");
        close(&outs[3], &[0.19583337, 0.34166667, 0.25833333], "reserve_space_1: batch mean");
        close(&outs[4], &[0.69227433, 0.59201384, 0.59201396], "reserve_space_2: biased batch variance");
        // NCHW, factor 1: the batch's own statistics.
        let outs = run(&nchw(bn("FusedBatchNormV3", true)), x(true), stats()).unwrap();
        close(&outs[1], &[0.19583337, 0.34166667, 0.25833333], "NCHW batch mean");
        close(&outs[2], &[0.7552084, 0.6458333, 0.6458334], "NCHW batch variance");
        let want_y = [
            -1.3761599,
            1.6263707,
            1.3261176,
            1.0258645,
            0.7256115,
            0.42535844,
            2.190362,
            1.5410737,
            0.8917853,
            0.24249697,
            -0.40679133,
            -1.0560796,
            -1.2975905,
            -1.4599125,
            -1.6222346,
            -1.7845566,
            -0.16133606,
            -0.3236581,
            0.12510541,
            -0.17514765,
            -0.47540075,
            -0.7756538,
            -1.0759069,
            -1.3761599,
            -1.705368,
            -2.3546565,
            4.1382265,
            3.4889386,
            2.8396502,
            2.190362,
            -0.48598015,
            -0.6483022,
            -0.81062424,
            -0.9729463,
            -1.1352683,
            -1.2975905,
        ];
        close(&outs[0], &want_y, "NCHW y");
        // Training needs no running statistics when the factor is 1.
        let [s, o, _, _] = stats();
        let empty = || Tensor::zeros(DType::F32, [0]).unwrap();
        let outs = run(&bn("FusedBatchNormV3", true), x(false), [s, o, empty(), empty()]).unwrap();
        close(&outs[3], &[0.19583337, 0.34166667, 0.25833333], "without running statistics");
        // One element per channel: variance 0, not 0 / 0.
        let one = f32s(&[1, 1, 1, 3], &[1.5, -2.0, 7.0]);
        let outs = run(&bn("FusedBatchNormV3", true), one, stats()).unwrap();
        close(&outs[0], &[0., 1., -1.], "n = 1");
        assert_eq!(outs[2].as_slice::<f32>().unwrap(), &[0.0; 3]);
    }

    #[test]
    fn empty_inputs_give_nan_statistics() {
        for training in [false, true] {
            let outs =
                run(&bn("FusedBatchNormV3", training), Tensor::zeros(DType::F32, [0, 2, 2, 3]).unwrap(), stats())
                    .unwrap();
            assert_eq!(outs[0].dims(), &[0, 2, 2, 3]);
            for i in [1, 2] {
                assert!(outs[i].as_slice::<f32>().unwrap().iter().all(|v| v.is_nan()), "output {i}");
            }
        }
    }

    #[test]
    fn errors() {
        let n = bn("FusedBatchNormV3", false);
        let msg = |x: Tensor, stats: [Tensor; 4]| run(&n, x, stats).unwrap_err().into_message();
        assert_eq!(msg(f32s(&[3, 1, 3], &[0.; 9]), stats()), "input must be 4 or 5-dimensional: [3,1,3]");
        let [s, o, m, v] = stats();
        assert_eq!(
            msg(x(false), [s.reshaped([1, 3]).unwrap(), o.clone(), m.clone(), v.clone()]),
            "scale must be 1-dimensional: [1,3]"
        );
        let short = f32s(&[2], &[1., 1.]);
        assert_eq!(
            msg(x(false), [short.clone(), o.clone(), m.clone(), v.clone()]),
            "scale must have the same number of elements as the channels of x, got 2 and 3"
        );
        assert_eq!(
            msg(x(false), [s.clone(), o.clone(), short.clone(), v.clone()]),
            "When is_training=false, mean must have the same number of elements as the channels of x, got 2 and 3"
        );
        let averaging = bn("FusedBatchNormV3", true).attr("exponential_avg_factor", AttrValue::Float(0.5));
        let e = run(&averaging, x(false), [s, o, m, short]).unwrap_err();
        assert!(e.message.starts_with("When exponential_avg_factor != 1, variance must have"), "{e}");
        let f64_node = bn("FusedBatchNormV3", false).attr("T", ty(DType::F64));
        let e = run(&f64_node, x(false), stats()).unwrap_err();
        assert!(e.message.contains("does not support dtype float64"), "{e}");
        let bad = bn("FusedBatchNormV3", false).attr("data_format", AttrValue::Bytes(b"HWCN".to_vec()));
        assert!(run(&bad, x(false), stats()).unwrap_err().message.contains("Invalid data format"));
    }
}
