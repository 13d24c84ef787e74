//! Simulated quantization with a scale that keeps zero exact
//! (`tf.quantization.quantize_and_dequantize_v2`, what quantization-aware
//! graphs and TFLite conversions leave behind):
//! - `QuantizeAndDequantizeV2` and `V4`: `num_bits`, signedness, rounding
//!   (`HALF_TO_EVEN` or `HALF_UP`) and narrow range from attrs; the range
//!   from the input's own min and max, or given (`range_given`);
//! - `QuantizeAndDequantizeV3`: `num_bits` as an input, rounding half to
//!   even;
//! - `QuantizeAndDequantizeV4Grad`: the gradient where the input lay in
//!   [min, max], zeros for min and max.
//!
//! With `axis` each slice along it has its own range. Unlike fake_quant's
//! nudging, the scale is the largest that maps the range into the
//! integers without moving zero: `min_q / min` or `max_q / max`,
//! whichever is smaller, and the other end of the range follows it.
//!
//! Owns: these kernels, in TensorFlow's arithmetic (every step in the
//! input's own float type, clamping only a given range, NaN passing
//! through), and its checks and messages, including its refusal of any
//! per-axis range given to V2 and V4. Must not hold state beyond attrs.

use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::numeric::Float;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("QuantizeAndDequantizeV2", signature::<{ Form::V2 }>, build::<{ Form::V2 }>),
    OpDef::kernel("QuantizeAndDequantizeV3", signature::<{ Form::V3 }>, build::<{ Form::V3 }>),
    OpDef::kernel("QuantizeAndDequantizeV4", signature::<{ Form::V4 }>, build::<{ Form::V4 }>),
    OpDef::kernel("QuantizeAndDequantizeV4Grad", signature::<{ Form::GRAD }>, build::<{ Form::GRAD }>),
];

/// Which op: a const parameter (the kernels differ in inputs and checks).
struct Form;

impl Form {
    const V2: u8 = 2;
    const V3: u8 = 3;
    const V4: u8 = 4;
    const GRAD: u8 = 5;
}

fn float_type(node: &NodeSpec) -> Result<DType> {
    let dtype = node.attr_dtype("T")?;
    if !matches!(dtype, DType::F32 | DType::F64) {
        bail!(invalid_argument, "node '{}' ({}): T must be a float type, got {dtype}", node.name, node.op);
    }
    Ok(dtype)
}

/// V2/V4 `[T, T, T] -> [T]`; V3 `[T, T, T, int32] -> [T]`; the gradient
/// `[T, T, T, T] -> [T, T, T]`.
fn signature<const FORM: u8>(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(float_type(node)?);
    Ok(match FORM {
        Form::V3 => OpSignature::new(vec![t, t, t, ValueType::Tensor(DType::I32)], vec![t]),
        Form::GRAD => OpSignature::new(vec![t; 4], vec![t; 3]),
        _ => OpSignature::new(vec![t; 3], vec![t]),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rounding {
    HalfToEven,
    HalfUp,
}

struct QuantizeDequantize {
    form: u8,
    dtype: DType,
    signed_input: bool,
    /// `None` for V3 (an input) and the gradient.
    num_bits: Option<i64>,
    range_given: bool,
    rounding: Rounding,
    narrow_range: bool,
    axis: i64,
}

fn check_num_bits(num_bits: i64, signed_input: bool, form: u8) -> Result<()> {
    if num_bits <= 0 || num_bits >= if signed_input { 62 } else { 63 } {
        let flag = if form == Form::V3 { "`signed_input_`" } else { "signed_input_" };
        bail!(invalid_argument, "num_bits is out of range: {num_bits} with {flag} {}", i32::from(signed_input));
    }
    Ok(())
}

fn build<const FORM: u8>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let dtype = float_type(node)?;
    let axis = node.attr_int_or("axis", -1)?;
    if FORM == Form::GRAD {
        return Ok(Box::new(QuantizeDequantize {
            form: FORM,
            dtype,
            signed_input: true,
            num_bits: None,
            range_given: true,
            rounding: Rounding::HalfToEven,
            narrow_range: false,
            axis,
        }));
    }
    let signed_input = node.attr_bool_or("signed_input", true)?;
    let num_bits = if FORM == Form::V3 {
        None
    } else {
        let bits = node.attr_int_or("num_bits", 8)?;
        check_num_bits(bits, signed_input, FORM)?;
        Some(bits)
    };
    let rounding = match node.attr_str_or("round_mode", "HALF_TO_EVEN")?.as_str() {
        "HALF_TO_EVEN" => Rounding::HalfToEven,
        "HALF_UP" if FORM != Form::V3 => Rounding::HalfUp,
        other => bail!(
            invalid_argument,
            "node '{}' ({}): round_mode '{other}' is not HALF_TO_EVEN or HALF_UP",
            node.name,
            node.op
        ),
    };
    Ok(Box::new(QuantizeDequantize {
        form: FORM,
        dtype,
        signed_input,
        num_bits,
        range_given: node.attr_bool_or("range_given", false)?,
        rounding,
        narrow_range: node.attr_bool_or("narrow_range", false)?,
        axis,
    }))
}

/// The input seen as `[outer, depth, inner]` around `axis` (depth 1
/// without one).
#[derive(Debug, Clone, Copy)]
struct Channels {
    outer: usize,
    depth: usize,
    inner: usize,
}

impl Channels {
    fn of(input: &Tensor, axis: i64) -> Result<Channels> {
        let dims = input.dims();
        if axis < -1 {
            bail!(invalid_argument, "Axis must be at least -1. Found {axis}");
        }
        if axis == -1 {
            return Ok(Channels { outer: 1, depth: 1, inner: input.num_elements() });
        }
        let a = axis as usize;
        if a >= dims.len() {
            bail!(invalid_argument, "Shape must be at least rank {} but is rank {}", axis + 1, dims.len());
        }
        Ok(Channels { outer: dims[..a].iter().product(), depth: dims[a], inner: dims[a + 1..].iter().product() })
    }

    /// Calls `f(channel, flat index)` for every element.
    fn for_each(self, mut f: impl FnMut(usize, usize)) {
        for o in 0..self.outer {
            for c in 0..self.depth {
                let base = (o * self.depth + c) * self.inner;
                for i in base..base + self.inner {
                    f(c, i);
                }
            }
        }
    }
}

/// The float arithmetic TensorFlow does in the input's type.
trait QuantFloat: Float + std::fmt::Display {
    const MAX: Self;
    fn from_i64(v: i64) -> Self;
    fn round_ties_even(self) -> Self;
}

macro_rules! quant_float {
    ($($t:ty),*) => {$(
        impl QuantFloat for $t {
            const MAX: $t = <$t>::MAX;
            fn from_i64(v: i64) -> $t {
                v as $t
            }
            fn round_ties_even(self) -> $t {
                <$t>::round_ties_even(self)
            }
        }
    )*};
}

quant_float!(f32, f64);

/// One channel's range made exact for zero: TensorFlow's
/// `ComputeQuantizationRange`.
#[derive(Debug, Clone, Copy)]
struct Scaled<T> {
    min: T,
    max: T,
    scale: T,
    inverse: T,
}

fn scaled<T: QuantFloat>(min: T, max: T, min_q: i64, max_q: i64) -> Scaled<T> {
    let (min_qf, max_qf) = (T::from_i64(min_q), T::from_i64(max_q));
    let from_min = if min_qf.mul(min) > T::ZERO { min_qf.div(min) } else { T::MAX };
    let from_max = if max_qf.mul(max) > T::ZERO { max_qf.div(max) } else { T::MAX };
    if from_min < from_max {
        let inverse = min.div(min_qf);
        Scaled { min, max: max_qf.mul(inverse), scale: from_min, inverse }
    } else {
        let inverse = max.div(max_qf);
        Scaled { min: min_qf.mul(inverse), max, scale: from_max, inverse }
    }
}

impl QuantizeDequantize {
    fn levels(&self, num_bits: i64) -> (i64, i64) {
        if !self.signed_input {
            return (0, (1i64 << num_bits) - 1);
        }
        let half = 1i64 << (num_bits - 1);
        (if self.narrow_range { -half + 1 } else { -half }, half - 1)
    }

    /// The given per-channel (or one) range, checked as TensorFlow does.
    fn given_range<T: QuantFloat>(&self, min: &Tensor, max: &Tensor, channels: Channels) -> Result<Vec<(T, T)>> {
        let (lo, hi) = (min.as_slice::<T>()?, max.as_slice::<T>()?);
        if self.axis == -1 {
            let scalar = |t: &Tensor| if self.form == Form::V3 { t.num_elements() == 1 } else { t.rank() == 0 };
            if !scalar(min) || !scalar(max) {
                bail!(invalid_argument, "input_min must be a scalar.");
            }
            if lo[0] > hi[0] {
                bail!(invalid_argument, "Invalid range: input_min {} > input_max {}", lo[0], hi[0]);
            }
            return Ok(vec![(lo[0], hi[0])]);
        }
        for (t, name) in [(min, "input_min_tensor"), (max, "input_max_tensor")] {
            if t.rank() != 1 {
                bail!(invalid_argument, "Shape must be rank 1 for {name} when the axis is specified");
            }
        }
        if self.form != Form::V3 {
            // TensorFlow 2.21's V2 and V4 kernels refuse every range given per axis.
            bail!(invalid_argument, "input_min must be a scalar.");
        }
        for (t, name) in [(min, "input_min_tensor"), (max, "input_max_tensor")] {
            if t.num_elements() != channels.depth {
                bail!(
                    invalid_argument,
                    "{name} has incorrect size, was {} expected {} to match dim {} of the input {}",
                    t.num_elements(),
                    channels.depth,
                    self.axis,
                    t.shape()
                );
            }
        }
        Ok(lo.iter().copied().zip(hi.iter().copied()).collect())
    }

    fn quantize<T: QuantFloat>(&self, ctx: &mut OpContext<'_>) -> Result<Tensor> {
        let input = ctx.input(0)?;
        let channels = Channels::of(input, self.axis)?;
        let num_bits = match self.num_bits {
            Some(bits) => bits,
            None => {
                let bits = ctx.input(3)?;
                if bits.rank() != 0 {
                    bail!(
                        invalid_argument,
                        "Invalid shape. The `num_bits` tensor should be a scalar. Got dimensions: {}",
                        bits.rank()
                    );
                }
                let bits = i64::from(bits.scalar_value::<i32>()?);
                check_num_bits(bits, self.signed_input, self.form)?;
                bits
            }
        };
        let x = input.as_slice::<T>()?;
        let ranges = if self.range_given {
            self.given_range::<T>(ctx.input(1)?, ctx.input(2)?, channels)?
        } else {
            // Eigen's min and max skip NaN (a NaN never compares less).
            let mut ranges = vec![(T::TOP, T::BOTTOM); channels.depth];
            channels.for_each(|c, i| {
                let r = &mut ranges[c];
                if x[i] < r.0 {
                    r.0 = x[i];
                }
                if r.1 < x[i] {
                    r.1 = x[i];
                }
            });
            ranges
        };
        let (min_q, max_q) = self.levels(num_bits);
        let scales: Vec<Scaled<T>> = ranges.iter().map(|&(lo, hi)| scaled(lo, hi, min_q, max_q)).collect();
        let round = |v: T| match self.rounding {
            Rounding::HalfToEven => v.round_ties_even(),
            Rounding::HalfUp => v.add(T::from_f64(0.5)).floor(),
        };
        let mut out = vec![T::ZERO; x.len()];
        channels.for_each(|c, i| {
            let s = scales[c];
            let mut v = x[i];
            if self.range_given {
                // Eigen's cwiseMin then cwiseMax: NaN passes through.
                if s.max < v {
                    v = s.max;
                }
                if v < s.min {
                    v = s.min;
                }
            }
            out[i] = round(v.mul(s.scale)).mul(s.inverse);
        });
        Tensor::from_slice(input.shape().clone(), &out)
    }

    fn gradient<T: QuantFloat>(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (gradient, input) = (ctx.input(0)?, ctx.input(1)?);
        if gradient.num_elements() != input.num_elements() {
            bail!(invalid_argument, "gradient and input must be the same size");
        }
        let channels = Channels::of(input, self.axis)?;
        let (min, max) = (ctx.input(2)?, ctx.input(3)?);
        if self.axis == -1 && (min.rank() != 0 || max.rank() != 0) {
            bail!(invalid_argument, "input_min must be a scalar if axis is unspecified");
        }
        for (t, name) in [(min, "min"), (max, "max")] {
            if t.num_elements() != channels.depth {
                bail!(
                    invalid_argument,
                    "{name} has incorrect size, expected {} was {}",
                    channels.depth,
                    t.num_elements()
                );
            }
        }
        let (g, x, lo, hi) =
            (gradient.as_slice::<T>()?, input.as_slice::<T>()?, min.as_slice::<T>()?, max.as_slice::<T>()?);
        let mut backprop = vec![T::ZERO; x.len()];
        channels.for_each(|c, i| {
            if x[i] >= lo[c] && x[i] <= hi[c] {
                backprop[i] = g[i];
            }
        });
        let backprop = Tensor::from_slice(input.shape().clone(), &backprop)?;
        let (min_zeros, max_zeros) =
            (Tensor::zeros(self.dtype, min.shape().clone())?, Tensor::zeros(self.dtype, max.shape().clone())?);
        ctx.set_output(0, backprop);
        ctx.set_output(1, min_zeros);
        ctx.set_output(2, max_zeros);
        Ok(())
    }

    fn run<T: QuantFloat>(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        if self.form == Form::GRAD {
            return self.gradient::<T>(ctx);
        }
        let out = self.quantize::<T>(ctx)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

impl OpKernel for QuantizeDequantize {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        match self.dtype {
            DType::F32 => self.run::<f32>(ctx),
            DType::F64 => self.run::<f64>(ctx),
            other => Err(Status::internal(format!("{other} reached a float kernel"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run_all, run1, ty};
    use crate::tensor::{DType, Tensor};

    fn x() -> Tensor {
        Tensor::from_slice([2, 4], &[-1.3f32, 0.2, 0.55, 2.7, 0.004, -0.5, 1.25, -2.0]).unwrap()
    }

    fn s(v: f32) -> Tensor {
        Tensor::scalar(v)
    }

    fn v(values: &[f32]) -> Tensor {
        Tensor::from_slice([values.len()], values).unwrap()
    }

    fn qdq(op: &str) -> crate::graph::spec::NodeSpec {
        node(op).attr("T", ty(DType::F32))
    }

    fn close(got: &Tensor, want: &[f32]) {
        let got = got.as_slice::<f32>().unwrap();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0) || (g.is_nan() && w.is_nan()), "{got:?} vs {want:?}");
        }
    }

    /// TensorFlow 2.21's outputs for the same calls.
    #[test]
    fn ranges_scales_and_rounding_match_tensorflow() {
        let v2 = |attrs: &[(&str, AttrValue)], min: Tensor, max: Tensor| {
            let mut n = qdq("QuantizeAndDequantizeV2");
            for (k, a) in attrs {
                n = n.attr(*k, a.clone());
            }
            run1(&n, &[x(), min, max]).unwrap()
        };
        close(
            &v2(&[], s(0.0), s(0.0)),
            &[-1.2968504, 0.19133858, 0.5527559, 2.7, 0.0, -0.5102362, 1.2543308, -1.9984252],
        );
        let given = ("range_given", AttrValue::Bool(true));
        close(
            &v2(&[given.clone(), ("num_bits", AttrValue::Int(4))], s(-1.0), s(1.0)),
            &[-1.1428572, 0.14285715, 0.5714286, 1.0, 0.0, -0.5714286, 1.0, -1.1428572],
        );
        close(
            &v2(
                &[given.clone(), ("num_bits", AttrValue::Int(4)), ("signed_input", AttrValue::Bool(false))],
                s(-1.0),
                s(1.0),
            ),
            &[0.0, 0.20000002, 0.53333336, 1.0, 0.0, 0.0, 1.0, 0.0],
        );
        let half_up = [
            given,
            ("num_bits", AttrValue::Int(3)),
            ("round_mode", AttrValue::Bytes(b"HALF_UP".to_vec())),
            ("narrow_range", AttrValue::Bool(true)),
        ];
        close(&v2(&half_up, s(-1.0), s(1.0)), &[-1.0, 0.33333334, 0.6666667, 1.0, 0.0, -0.33333334, 1.0, -1.0]);
        close(
            &v2(&[("num_bits", AttrValue::Int(5)), ("axis", AttrValue::Int(0))], v(&[0.0, 0.0]), v(&[0.0, 0.0])),
            &[-1.26, 0.18, 0.54, 2.7, 0.0, -0.5, 1.25, -2.0],
        );
        let v3 = qdq("QuantizeAndDequantizeV3").attr("range_given", AttrValue::Bool(true));
        close(
            &run1(&v3, &[x(), s(-2.0), s(2.0), Tensor::scalar(6i32)]).unwrap(),
            &[-1.2903225, 0.19354838, 0.58064514, 2.0, 0.0, -0.516129, 1.2258065, -2.0],
        );
        let per_axis = v3.clone().attr("axis", AttrValue::Int(1));
        let (lo, hi) = (v(&[-1.0, -0.5, 0.0, -3.0]), v(&[1.0, 0.5, 1.0, 3.0]));
        close(
            &run1(&per_axis, &[x(), lo, hi, Tensor::scalar(5i32)]).unwrap(),
            &[-1.0666667, 0.20000002, 0.53333336, 2.8, 0.0, -0.5, 1.0, -2.0],
        );
        let v4 = qdq("QuantizeAndDequantizeV4").attr("num_bits", AttrValue::Int(7));
        close(
            &run1(&v4, &[x(), s(0.0), s(0.0)]).unwrap(),
            &[-1.2857143, 0.21428572, 0.55714285, 2.7, 0.0, -0.51428574, 1.2428572, -2.0142858],
        );
        // NaN is skipped by the range and passes through; ±inf makes every value NaN.
        let v2 = qdq("QuantizeAndDequantizeV2");
        close(&run1(&v2, &[v(&[1.0, f32::NAN, -2.0]), s(0.0), s(0.0)]).unwrap(), &[1.0, f32::NAN, -2.0]);
        close(&run1(&v2, &[v(&[1.0, f32::INFINITY, -2.0]), s(0.0), s(0.0)]).unwrap(), &[f32::NAN; 3]);
        // An all-negative input, unsigned: TensorFlow's huge value, kept.
        let unsigned = v2.clone().attr("signed_input", AttrValue::Bool(false));
        close(&run1(&unsigned, &[v(&[-1.0, -1.0]), s(0.0), s(0.0)]).unwrap(), &[1.3344406e36, 1.3344406e36]);
    }

    #[test]
    fn the_gradient_passes_inside_the_range() {
        let grad = qdq("QuantizeAndDequantizeV4Grad");
        let ones = Tensor::from_slice([2, 4], &[1.0f32; 8]).unwrap();
        let outs = run_all(&grad, &[ones.clone(), x(), s(-1.0), s(1.0)]).unwrap();
        close(&outs[0], &[0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
        assert_eq!(outs[1].to_f64_vec(), [0.0]);
        let per_axis = grad.attr("axis", AttrValue::Int(1));
        let outs = run_all(&per_axis, &[ones, x(), v(&[-1.0, 0.0, 0.0, -3.0]), v(&[1.0, 0.3, 1.0, 3.0])]).unwrap();
        close(&outs[0], &[0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0]);
        assert_eq!(outs[2].dims(), &[4]);
    }

    /// TensorFlow's messages, including its refusal of a per-axis range
    /// given to V2.
    #[test]
    fn bad_arguments_fail_as_in_tensorflow() {
        let given = qdq("QuantizeAndDequantizeV2").attr("range_given", AttrValue::Bool(true));
        let err = |n: &crate::graph::spec::NodeSpec, inputs: &[Tensor]| run_all(n, inputs).unwrap_err().message.clone();
        assert!(err(&given, &[x(), s(1.0), s(-1.0)]).contains("Invalid range: input_min 1 > input_max -1"));
        assert!(err(&given, &[x(), v(&[0.0, 1.0]), v(&[0.0, 1.0])]).contains("input_min must be a scalar."));
        let axis = given.clone().attr("axis", AttrValue::Int(1));
        assert!(err(&axis, &[x(), s(-1.0), s(1.0)]).contains("Shape must be rank 1 for input_min_tensor"));
        assert!(err(&axis, &[x(), v(&[0.0; 4]), v(&[1.0; 4])]).contains("input_min must be a scalar."));
        let far = qdq("QuantizeAndDequantizeV2").attr("axis", AttrValue::Int(2));
        assert!(err(&far, &[x(), s(0.0), s(0.0)]).contains("Shape must be at least rank 3 but is rank 2"));
        let below = qdq("QuantizeAndDequantizeV2").attr("axis", AttrValue::Int(-2));
        assert!(err(&below, &[x(), s(0.0), s(0.0)]).contains("Axis must be at least -1. Found -2"));
        let bits = qdq("QuantizeAndDequantizeV2").attr("num_bits", AttrValue::Int(0));
        assert!(
            crate::ops::testing::build(&bits)
                .err()
                .unwrap()
                .message
                .contains("num_bits is out of range: 0 with signed_input_ 1")
        );
        let v3 = qdq("QuantizeAndDequantizeV3");
        assert!(
            err(&v3, &[x(), s(-1.0), s(1.0), Tensor::scalar(70i32)])
                .contains("num_bits is out of range: 70 with `signed_input_` 1")
        );
        let v3_axis = v3.attr("range_given", AttrValue::Bool(true)).attr("axis", AttrValue::Int(1));
        let msg = err(&v3_axis, &[x(), v(&[-1.0; 3]), v(&[1.0; 3]), Tensor::scalar(5i32)]);
        assert!(
            msg.contains("input_min_tensor has incorrect size, was 3 expected 4 to match dim 1 of the input [3]"),
            "{msg}"
        );
        let grad = qdq("QuantizeAndDequantizeV4Grad");
        assert!(err(&grad, &[v(&[1.0; 3]), x(), s(-1.0), s(1.0)]).contains("gradient and input must be the same size"));
        let ones = Tensor::from_slice([2, 4], &[1.0f32; 8]).unwrap();
        assert!(
            err(&grad, &[ones.clone(), x(), v(&[-1.0]), v(&[1.0])])
                .contains("input_min must be a scalar if axis is unspecified")
        );
        let grad_axis = grad.attr("axis", AttrValue::Int(1));
        assert!(
            err(&grad_axis, &[ones, x(), v(&[-1.0, 0.0]), v(&[1.0, 0.3])])
                .contains("min has incorrect size, expected 4 was 2")
        );
    }
}
