//! Range: `start, start + delta, ...` up to but excluding `limit`.
//!
//! Owns: this kernel and its signature. Must not hold state.
//!
//! As TensorFlow: the length is `ceil(|limit - start| / |delta|)` (for
//! floats computed in the element type), and value `i` is
//! `start + T(i) * delta` in the element type, not a running sum, so float
//! outputs match TensorFlow's bit for bit. A zero delta, or one pointing
//! away from `limit`, is an InvalidArgument.

use super::super::math::REAL;
use super::super::registry::OpDef;
use super::super::{FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, unsupported_dtype};
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Element, Tensor};
use std::cmp::Ordering;

pub const DEFS: &[OpDef] = &[OpDef::kernel("Range", range_signature, build_range)];

/// `[Tidx, Tidx, Tidx] -> [Tidx]`, int32 by default.
fn range_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype_or("Tidx", DType::I32)?);
    Ok(OpSignature::new(vec![t, t, t], vec![t]))
}

/// What Range needs of its element type.
trait RangeElem: Element {
    const ZERO: Self;
    /// The value as TensorFlow's messages print it.
    fn show(self) -> String;
    /// The output length for a delta already checked to point from
    /// `start` toward `limit`.
    fn len(start: Self, limit: Self, delta: Self) -> Result<usize>;
    /// Value `i` of the range.
    fn nth(start: Self, delta: Self, i: usize) -> Self;
}

macro_rules! int_range {
    ($t:ty) => {
        impl RangeElem for $t {
            const ZERO: Self = 0;
            fn show(self) -> String {
                self.to_string()
            }
            fn len(start: $t, limit: $t, delta: $t) -> Result<usize> {
                // In i128, so neither the difference nor |delta| overflows.
                let span = (limit as i128 - start as i128).unsigned_abs();
                let step = (delta as i128).unsigned_abs();
                Ok(span.div_ceil(step) as usize)
            }
            #[inline(always)]
            fn nth(start: $t, delta: $t, i: usize) -> $t {
                // The true value fits; wrapping arithmetic reaches it even
                // where `i * delta` alone would not.
                start.wrapping_add((i as $t).wrapping_mul(delta))
            }
        }
    };
}
int_range!(i32);
int_range!(i64);

macro_rules! float_range {
    ($t:ty) => {
        impl RangeElem for $t {
            const ZERO: Self = 0.0;
            fn show(self) -> String {
                six_digits(self as f64)
            }
            fn len(start: $t, limit: $t, delta: $t) -> Result<usize> {
                let n = ((limit - start) / delta).abs().ceil();
                // NaN fails this too.
                if n.partial_cmp(&(i64::MAX as $t)).is_none_or(|o| o == Ordering::Greater) {
                    bail!(invalid_argument, "Requires ((limit - start) / delta) <= {}", i64::MAX);
                }
                Ok(n as usize)
            }
            #[inline(always)]
            fn nth(start: $t, delta: $t, i: usize) -> $t {
                start + i as $t * delta
            }
        }
    };
}
float_range!(f32);
float_range!(f64);

/// `x` as C's `%g` prints it (six significant digits, trailing zeros
/// dropped, an exponent beyond 1e-5 .. 1e6), which is how TensorFlow's
/// messages print floats.
fn six_digits(x: f64) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "nan".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    // Rounded to six significant digits first: the exponent is the rounded one's.
    let sci = format!("{x:.5e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s.to_string() }
    };
    if !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exponent.abs())
    } else {
        trim(&format!("{x:.*}", (5 - exponent) as usize))
    }
}

/// The single value of `t` (a scalar or a one-element vector).
fn scalar_arg<T: Element>(t: &Tensor, what: &str) -> Result<T> {
    if !(t.rank() == 0 || (t.rank() == 1 && t.dims()[0] == 1)) {
        bail!(invalid_argument, "{what} must be a scalar, not shape {}", t.shape());
    }
    t.scalar_value::<T>()
}

fn compute_range<T: RangeElem>(ctx: &mut OpContext<'_>) -> Result<()> {
    let start = scalar_arg::<T>(ctx.input(0)?, "start")?;
    let limit = scalar_arg::<T>(ctx.input(1)?, "limit")?;
    let delta = scalar_arg::<T>(ctx.input(2)?, "delta")?;
    if delta == T::ZERO {
        bail!(invalid_argument, "Requires delta != 0: {}", delta.show());
    }
    // A NaN start or limit fails both checks, as in TensorFlow.
    let order = start.partial_cmp(&limit);
    if delta > T::ZERO {
        if !matches!(order, Some(Ordering::Less | Ordering::Equal)) {
            bail!(invalid_argument, "Requires start <= limit when delta > 0: {}/{}", start.show(), limit.show());
        }
    } else if !matches!(order, Some(Ordering::Greater | Ordering::Equal)) {
        bail!(invalid_argument, "Requires start >= limit when delta < 0: {}/{}", start.show(), limit.show());
    }
    let len = T::len(start, limit, delta)?;
    if len.checked_mul(size_of::<T>()).is_none_or(|bytes| bytes > isize::MAX as usize) {
        bail!(invalid_argument, "Range of {len} elements is too large to allocate");
    }
    let out = Tensor::build::<T>([len], |out| {
        for (i, o) in out.iter_mut().enumerate() {
            *o = T::nth(start, delta, i);
        }
    })?;
    ctx.set_output(0, out);
    Ok(())
}

fn build_range(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype_or("Tidx", DType::I32)?;
    let compute = match dtype {
        DType::F32 => compute_range::<f32>,
        DType::F64 => compute_range::<f64>,
        DType::I32 => compute_range::<i32>,
        DType::I64 => compute_range::<i64>,
        _ => {
            return Err(unsupported_dtype("Range", dtype, REAL));
        }
    };
    Ok(FnKernel::boxed(compute))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{node, run1, ty};

    fn range(d: DType, args: [Tensor; 3]) -> Result<Tensor> {
        run1(&node("Range").attr("Tidx", ty(d)), &args)
    }

    #[test]
    fn integer_ranges() {
        let out = run1(&node("Range"), &[Tensor::scalar(0i32), Tensor::scalar(5i32), Tensor::scalar(2i32)]).unwrap();
        assert_eq!(out.dtype(), DType::I32);
        assert_eq!(out.as_slice::<i32>().unwrap(), &[0, 2, 4]);
        let out = range(DType::I64, [Tensor::scalar(10i64), Tensor::scalar(1i64), Tensor::scalar(-3i64)]).unwrap();
        assert_eq!(out.as_slice::<i64>().unwrap(), &[10, 7, 4]);
        let out = range(DType::I32, [Tensor::scalar(3i32), Tensor::scalar(3i32), Tensor::scalar(1i32)]).unwrap();
        assert_eq!(out.dims(), &[0]);
        // Near the ends of the type: no overflow in the length or the last step.
        let out =
            range(DType::I32, [Tensor::scalar(i32::MAX - 2), Tensor::scalar(i32::MAX), Tensor::scalar(1i32)]).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), &[i32::MAX - 2, i32::MAX - 1]);
        let out =
            range(DType::I32, [Tensor::scalar(i32::MIN), Tensor::scalar(i32::MAX), Tensor::scalar(i32::MAX)]).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), &[i32::MIN, -1, i32::MAX - 1]);
        // One-element vectors are accepted as scalars.
        let v = Tensor::from_slice::<i32>([1], &[1]).unwrap();
        let out = range(DType::I32, [v, Tensor::scalar(5i32), Tensor::scalar(2i32)]).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), &[1, 3]);
    }

    #[test]
    fn float_ranges_multiply_out_as_tensorflow() {
        // tf.range(0.1, 1.0, 0.1): nine values, each rounded as TensorFlow's
        // (a running sum would give 0.8000001 and 0.9000001).
        let out = range(DType::F32, [Tensor::scalar(0.1f32), Tensor::scalar(1.0f32), Tensor::scalar(0.1f32)]).unwrap();
        // (as float32 literals: 0.70000005 is 0.7000000476837158, 0.90000004 is 0.9000000357627869)
        let want: [f32; 9] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.70000005, 0.8, 0.90000004];
        assert_eq!(out.as_slice::<f32>().unwrap(), &want);
        let out =
            range(DType::F64, [Tensor::scalar(1.5f64), Tensor::scalar(0.0f64), Tensor::scalar(-0.25f64)]).unwrap();
        assert_eq!(out.as_slice::<f64>().unwrap(), &[1.5, 1.25, 1.0, 0.75, 0.5, 0.25]);
        // tf.range(0.1, 1.0, 0.1, dtype=tf.float64)
        let out = range(DType::F64, [Tensor::scalar(0.1f64), Tensor::scalar(1.0f64), Tensor::scalar(0.1f64)]).unwrap();
        assert_eq!(
            out.as_slice::<f64>().unwrap(),
            &[0.1, 0.2, 0.30000000000000004, 0.4, 0.5, 0.6, 0.7000000000000001, 0.8, 0.9]
        );
    }

    #[test]
    fn floats_print_as_c_does() {
        let cases = [
            (0.6995499730110168, "0.69955"),
            (-0.40447530150413513, "-0.404475"),
            (2.0, "2"),
            (1e30, "1e+30"),
            (123456.7, "123457"),
            (1234567.0, "1.23457e+06"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (999999.5, "1e+06"),
            (-0.0, "-0"),
            (f64::NAN, "nan"),
        ];
        for (x, want) in cases {
            assert_eq!(six_digits(x), want, "{x}");
        }
    }

    #[test]
    fn errors() {
        let i = |v: i32| Tensor::scalar(v);
        let err = range(DType::I32, [i(0), i(5), i(0)]).unwrap_err();
        assert_eq!(err.message, "Requires delta != 0: 0");
        let err = range(DType::I32, [i(5), i(0), i(1)]).unwrap_err();
        assert_eq!(err.message, "Requires start <= limit when delta > 0: 5/0");
        let err = range(DType::I32, [i(0), i(5), i(-1)]).unwrap_err();
        assert_eq!(err.message, "Requires start >= limit when delta < 0: 0/5");
        let f = |v: f32| Tensor::scalar(v);
        let err = range(DType::F32, [f(0.5), f(2.0), f(-0.5)]).unwrap_err();
        assert_eq!(err.message, "Requires start >= limit when delta < 0: 0.5/2");
        // Six significant digits, as TensorFlow prints floats.
        let err = range(DType::F32, [f(-3.223_132_4), f(-2.988_925), f(-0.5)]).unwrap_err();
        assert_eq!(err.message, "Requires start >= limit when delta < 0: -3.22313/-2.98892");
        let err = range(DType::F32, [f(0.0), f(1e30), f(1e-30)]).unwrap_err();
        assert_eq!(err.message, "Requires ((limit - start) / delta) <= 9223372036854775807");
        let err = range(DType::F32, [f(0.0), f(1.0), f(f32::NAN)]).unwrap_err();
        assert!(err.message.contains("Requires"), "{err}");
        let err = range(DType::I32, [Tensor::from_slice::<i32>([2], &[1, 2]).unwrap(), i(5), i(1)]).unwrap_err();
        assert_eq!(err.message, "start must be a scalar, not shape [2]");
        let err =
            range(DType::I64, [Tensor::scalar(0i64), Tensor::scalar(i64::MAX), Tensor::scalar(1i64)]).unwrap_err();
        assert!(err.message.contains("too large"), "{err}");
        let bad = node("Range").attr("Tidx", ty(DType::Bool));
        let sig = (crate::ops::lookup("Range").unwrap().signature)(&bad).unwrap();
        let crate::ops::Implementation::Kernel(build) = crate::ops::lookup("Range").unwrap().implementation else {
            unreachable!()
        };
        assert!(build(&KernelInit { node: &bad, signature: &sig }).is_err());
    }
}
