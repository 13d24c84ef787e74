//! Fake quantization, what quantization-aware training (the TF Model
//! Optimization toolkit, `tf.quantization.fake_quant_*`) leaves in a
//! graph: values clamped to a range and rounded to one of `2^num_bits`
//! levels, still as float32.
//! - `FakeQuantWithMinMaxArgs`: the range from attrs;
//! - `FakeQuantWithMinMaxVars`: from scalar inputs (learned variables);
//! - `FakeQuantWithMinMaxVarsPerChannel`: one range per element of the
//!   last dimension;
//! - their `Gradient` ops: the incoming gradient where the input lay inside
//!   the nudged range, and (Vars) the gradient that fell below or above it
//!   summed for min and max.
//!
//! Owns: these kernels and TensorFlow's nudging of a range so that zero is
//! exactly representable. Must not hold state beyond parsed attributes.
//!
//! Arithmetic follows TensorFlow's kernel in float32: clamp, shift to the
//! nudged min, level `q = floor(x * (1/scale) + 0.5)`, value
//! `(q - zero's level) * scale` (not `q * scale + min`, which rounds
//! differently), so the outputs match TensorFlow's bit for bit.

use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("FakeQuantWithMinMaxArgs", args_signature::<false>, build_fake_quant::<false>),
    OpDef::kernel("FakeQuantWithMinMaxArgsGradient", args_signature::<true>, build_fake_quant::<true>),
    OpDef::kernel("FakeQuantWithMinMaxVars", vars_signature::<false>, build_fake_quant::<false>),
    OpDef::kernel("FakeQuantWithMinMaxVarsGradient", vars_signature::<true>, build_fake_quant::<true>),
    OpDef::kernel("FakeQuantWithMinMaxVarsPerChannel", vars_signature::<false>, build_fake_quant::<false>),
    OpDef::kernel("FakeQuantWithMinMaxVarsPerChannelGradient", vars_signature::<true>, build_fake_quant::<true>),
];

const F: ValueType = ValueType::Tensor(DType::F32);

/// `[float] -> [float]`, the gradient `[float, float] -> [float]`.
fn args_signature<const GRAD: bool>(_: &NodeSpec) -> Result<OpSignature> {
    Ok(if GRAD { OpSignature::new(vec![F, F], vec![F]) } else { OpSignature::new(vec![F], vec![F]) })
}

/// `[float, float, float] -> [float]`, the gradient
/// `[float, float, float, float] -> [float, float, float]`.
fn vars_signature<const GRAD: bool>(_: &NodeSpec) -> Result<OpSignature> {
    Ok(if GRAD { OpSignature::new(vec![F, F, F, F], vec![F, F, F]) } else { OpSignature::new(vec![F, F, F], vec![F]) })
}

/// A range nudged so that zero falls on a level.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Nudged {
    min: f32,
    max: f32,
    scale: f32,
    /// The level of zero, less the lowest level: level `q` (counted from
    /// the nudged min) stands for `(q - zero_offset) * scale`.
    zero_offset: f32,
}

impl Nudged {
    /// TensorFlow's `Nudge`.
    fn new(min: f32, max: f32, quant_min: u32, quant_max: u32) -> Nudged {
        let (qmin, qmax) = (quant_min as f32, quant_max as f32);
        let scale = (max - min) / (qmax - qmin);
        let zero_from_min = qmin - min / scale;
        let zero = if zero_from_min < qmin {
            quant_min as u16
        } else if zero_from_min > qmax {
            quant_max as u16
        } else {
            // std::round: halves away from zero.
            zero_from_min.round() as u16
        };
        let zero = f32::from(zero);
        Nudged { min: (qmin - zero) * scale, max: (qmax - zero) * scale, scale, zero_offset: zero - qmin }
    }

    /// `min(x, max)` then `max(_, min)`, in Eigen's order (a range with
    /// max below min clamps everything to min).
    fn clamp(&self, x: f32) -> f32 {
        let below = if x < self.max { x } else { self.max };
        if below > self.min { below } else { self.min }
    }

    fn quantize(&self, x: f32) -> f32 {
        let shifted = self.clamp(x) - self.min;
        let level = (shifted * (1.0 / self.scale) + 0.5).floor();
        (level - self.zero_offset) * self.scale
    }

    fn inside(&self, x: f32) -> bool {
        x >= self.min && x <= self.max
    }
}

struct FakeQuant {
    /// The `Args` range; `None` reads min and max from inputs.
    range: Option<(f32, f32)>,
    quant_min: u32,
    quant_max: u32,
    gradient: bool,
}

fn build_fake_quant<const GRAD: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let bits = node.attr_int_or("num_bits", 8)?;
    if !(2..=16).contains(&bits) {
        bail!(
            invalid_argument,
            "node '{}' ({}): num_bits must be between 2 and 16, inclusive, got {bits}",
            node.name,
            node.op
        );
    }
    let narrow = node.attr_bool_or("narrow_range", false)?;
    let range = if node.op.starts_with("FakeQuantWithMinMaxArgs") {
        let (min, max) = (node.attr_float_or("min", -6.0)?, node.attr_float_or("max", 6.0)?);
        if min >= max {
            bail!(
                invalid_argument,
                "node '{}' ({}): min has to be smaller than max, was: {min} >= {max}",
                node.name,
                node.op
            );
        }
        Some((min, max))
    } else {
        None
    };
    Ok(Box::new(FakeQuant { range, quant_min: u32::from(narrow), quant_max: (1u32 << bits) - 1, gradient: GRAD }))
}

impl FakeQuant {
    /// The nudged range of each channel (one for a scalar range).
    fn ranges(&self, ctx: &OpContext<'_>, first_range_input: usize, channels: usize) -> Result<Vec<Nudged>> {
        let nudge = |min: f32, max: f32| Nudged::new(min, max, self.quant_min, self.quant_max);
        if let Some((min, max)) = self.range {
            return Ok(vec![nudge(min, max)]);
        }
        let (min, max) = (ctx.input(first_range_input)?, ctx.input(first_range_input + 1)?);
        if min.dims() != max.dims() || min.rank() > 1 {
            bail!(
                invalid_argument,
                "min and max must be scalars or vectors of one shape, got {} and {}",
                min.shape(),
                max.shape()
            );
        }
        if min.rank() == 1 && min.dims()[0] != channels {
            bail!(
                invalid_argument,
                "min and max must have one element per channel: the last dimension of the inputs is {channels}, min has {}",
                min.dims()[0]
            );
        }
        let (min, max) = (min.as_slice::<f32>()?, max.as_slice::<f32>()?);
        Ok(min.iter().zip(max).map(|(&a, &b)| nudge(a, b)).collect())
    }
}

impl OpKernel for FakeQuant {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        // Gradients: [gradients, inputs, (min, max)]; forward: [inputs, (min, max)].
        let x_input = usize::from(self.gradient);
        let x = ctx.input(x_input)?;
        let channels = x.dims().last().copied().unwrap_or(1);
        let ranges = self.ranges(ctx, x_input + 1, channels)?;
        // Vars ranges given as vectors are per channel (even of one element).
        let per_channel = self.range.is_none() && ctx.input(x_input + 1)?.rank() == 1;
        if per_channel && x.rank() == 0 {
            bail!(invalid_argument, "inputs must have at least one dimension for per-channel ranges");
        }
        let range_of = |i: usize| &ranges[if per_channel { i % channels } else { 0 }];
        let values = x.as_slice::<f32>()?;
        if !self.gradient {
            let out: Vec<f32> = values.iter().enumerate().map(|(i, &v)| range_of(i).quantize(v)).collect();
            ctx.set_output(0, Tensor::from_slice::<f32>(x.dims(), &out)?);
            return Ok(());
        }
        let grads = ctx.input(0)?;
        if grads.dims() != x.dims() {
            bail!(
                invalid_argument,
                "gradients and inputs must have the same shape, got {} and {}",
                grads.shape(),
                x.shape()
            );
        }
        let grads = grads.as_slice::<f32>()?;
        let mut wrt_input = Vec::with_capacity(values.len());
        let mut wrt_min = vec![0f32; ranges.len()];
        let mut wrt_max = vec![0f32; ranges.len()];
        for (i, (&v, &g)) in values.iter().zip(grads).enumerate() {
            let range = range_of(i);
            let channel = if per_channel { i % channels } else { 0 };
            wrt_input.push(if range.inside(v) { g } else { 0.0 });
            if v < range.min {
                wrt_min[channel] += g;
            } else if v > range.max {
                wrt_max[channel] += g;
            }
        }
        let out = Tensor::from_slice::<f32>(x.dims(), &wrt_input)?;
        if self.range.is_some() {
            ctx.set_output(0, out);
            return Ok(());
        }
        let range_dims = ctx.input(x_input + 1)?.dims().to_vec();
        ctx.set_output(0, out);
        ctx.set_output(1, Tensor::from_slice::<f32>(range_dims.as_slice(), &wrt_min)?);
        ctx.set_output(2, Tensor::from_slice::<f32>(range_dims.as_slice(), &wrt_max)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::spec::{AttrValue, NodeSpec};
    use crate::ops::sparse::testing::f32s;
    use crate::ops::testing::node;
    use crate::ops::testing::run_all;
    use crate::tensor::Tensor;

    fn x() -> Tensor {
        f32s(&[9], &[-7., -1.2, -0.01, 0.0, 0.33, 1.7, 2.5, 6.1, 100.])
    }
    fn values(op: &NodeSpec, inputs: &[Tensor]) -> Vec<Vec<f32>> {
        run_all(op, inputs).unwrap().iter().map(|t| t.as_slice::<f32>().unwrap().to_vec()).collect()
    }

    #[test]
    fn levels_match_tensorflow_bit_for_bit() {
        // TensorFlow 2.21's outputs for the same calls.
        let args = node("FakeQuantWithMinMaxArgs");
        let want = [-6.0235295, -1.1764706, 0.0, 0.0, 0.32941177, 1.6941177, 2.4941177, 5.9764705, 5.9764705];
        assert_eq!(values(&args, &[x()])[0], want);
        let narrow = node("FakeQuantWithMinMaxArgs")
            .attr("min", AttrValue::Float(-1.3))
            .attr("max", AttrValue::Float(2.9))
            .attr("num_bits", AttrValue::Int(4))
            .attr("narrow_range", AttrValue::Bool(true));
        let want = [-1.1999999, -1.1999999, 0.0, 0.0, 0.29999998, 1.8, 2.399_999_9, 2.9999998, 2.9999998];
        assert_eq!(values(&narrow, &[x()])[0], want);
        let vars = node("FakeQuantWithMinMaxVars");
        let want = [-0.7003921, -0.7003921, -0.01490196, 0.0, 0.32784313, 1.6988235, 2.5035293, 3.0996077, 3.0996077];
        assert_eq!(values(&vars, &[x(), Tensor::scalar(-0.7f32), Tensor::scalar(3.1f32)])[0], want);
        // max below min: everything clamps to the nudged min, as in TensorFlow.
        assert_eq!(values(&vars, &[x(), Tensor::scalar(1f32), Tensor::scalar(0.5f32)])[0], [0.5; 9]);
        let per_channel = node("FakeQuantWithMinMaxVarsPerChannel");
        let x8 = f32s(&[4, 2], &[-7., -1.2, -0.01, 0.0, 0.33, 1.7, 2.5, 6.1]);
        let got = values(&per_channel, &[x8, f32s(&[2], &[-1., 0.2]), f32s(&[2], &[1., 3.])]);
        assert_eq!(got[0], [-0.9960785, 0.0, -0.007843138, 0.0, 0.32941177, 1.7019607, 1.0039216, 2.8]);
    }

    #[test]
    fn gradients_pass_inside_the_range_and_sum_outside_it() {
        let args = node("FakeQuantWithMinMaxArgsGradient")
            .attr("min", AttrValue::Float(-1.3))
            .attr("max", AttrValue::Float(2.9));
        assert_eq!(values(&args, &[f32s(&[9], &[1.; 9]), x()])[0], [0., 1., 1., 1., 1., 1., 1., 0., 0.]);
        let vars = node("FakeQuantWithMinMaxVarsGradient");
        let grads = f32s(&[9], &[0., 1., 2., 3., 4., 5., 6., 7., 8.]);
        let got = values(&vars, &[grads, x(), Tensor::scalar(-0.7f32), Tensor::scalar(3.1f32)]);
        assert_eq!(got[0], [0., 0., 2., 3., 4., 5., 6., 0., 0.]);
        assert_eq!((got[1].as_slice(), got[2].as_slice()), ([1.].as_slice(), [15.].as_slice()));
        let e = run_all(
            &node("FakeQuantWithMinMaxArgs").attr("min", AttrValue::Float(1.)).attr("max", AttrValue::Float(0.5)),
            &[x()],
        );
        assert!(e.unwrap_err().message.contains("min has to be smaller than max"));
    }
}
