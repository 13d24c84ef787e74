//! `CheckNumerics` and `CheckNumericsV2` (`tf.debugging.check_numerics`,
//! and every op `tf.debugging.enable_check_numerics` instruments): the
//! input passes through unless it holds a NaN or an infinity, which fails
//! the step with the node's message and TensorFlow's wording (V2 tells
//! `-Inf` from `+Inf`).
//!
//! Owns: these kernels. Must not hold state.

use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::math::FLOAT;
use crate::ops::numeric::Float;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, unsupported_dtype};
use crate::tensor::DType;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("CheckNumerics", check_signature, build_check::<false>),
    OpDef::kernel("CheckNumericsV2", check_signature, build_check::<true>),
];

/// `[T] -> [T]`.
fn check_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t], vec![t]))
}

struct CheckNumerics {
    message: String,
    signed_infinities: bool,
    dtype: DType,
}

fn build_check<const V2: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype = init.node.attr_dtype("T")?;
    if !FLOAT.contains(&dtype) {
        return Err(unsupported_dtype(&init.node.op, dtype, FLOAT));
    }
    let message = init.node.attr_str_or("message", "")?;
    Ok(Box::new(CheckNumerics { message, signed_infinities: V2, dtype }))
}

/// Which kinds of non-finite values a slice holds: -Inf, +Inf, NaN.
fn non_finite<T: Float>(values: &[T]) -> [bool; 3] {
    let mut seen = [false; 3];
    for &x in values {
        if x.is_nan() {
            seen[2] = true;
        } else if x.is_infinite() {
            seen[usize::from(x > T::ZERO)] = true;
        }
    }
    seen
}

impl OpKernel for CheckNumerics {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.take_input(0)?;
        let [minus, plus, nan] = match self.dtype {
            DType::F32 => non_finite(input.as_slice::<f32>()?),
            _ => non_finite(input.as_slice::<f64>()?),
        };
        let kinds: Vec<&str> = if self.signed_infinities {
            [(minus, "-Inf"), (plus, "+Inf"), (nan, "NaN")].iter().filter(|k| k.0).map(|k| k.1).collect()
        } else {
            [(minus || plus, "Inf"), (nan, "NaN")].iter().filter(|k| k.0).map(|k| k.1).collect()
        };
        let listed = match kinds.as_slice() {
            [] => {
                ctx.set_output(0, input);
                return Ok(());
            }
            [one] => one.to_string(),
            [a, b] => format!("{a} and {b}"),
            [init @ .., last] => format!("{}, and {last}", init.join(", ")),
        };
        bail!(invalid_argument, "{} : Tensor had {listed} values", self.message)
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};
    use crate::tensor::{DType, Tensor};

    fn check(op: &str, values: &[f32]) -> Result<Vec<f32>, String> {
        let spec = node(op).attr("T", ty(DType::F32)).attr("message", AttrValue::Bytes(b"msg".to_vec()));
        let input = Tensor::from_slice::<f32>([values.len()].as_slice(), values).unwrap();
        run1(&spec, &[input]).map(|t| t.as_slice::<f32>().unwrap().to_vec()).map_err(|e| e.message.clone())
    }

    #[test]
    fn non_finite_values_fail_with_tensorflows_messages() {
        assert_eq!(check("CheckNumerics", &[1., -2.]).unwrap(), [1., -2.]);
        assert_eq!(check("CheckNumerics", &[1., f32::NAN]).unwrap_err(), "msg : Tensor had NaN values");
        assert_eq!(check("CheckNumerics", &[1., f32::INFINITY]).unwrap_err(), "msg : Tensor had Inf values");
        let both = check("CheckNumerics", &[f32::NAN, f32::NEG_INFINITY]).unwrap_err();
        assert_eq!(both, "msg : Tensor had Inf and NaN values");
        let all = check("CheckNumericsV2", &[f32::NAN, f32::NEG_INFINITY, f32::INFINITY]).unwrap_err();
        assert_eq!(all, "msg : Tensor had -Inf, +Inf, and NaN values");
        assert_eq!(check("CheckNumericsV2", &[f32::NEG_INFINITY]).unwrap_err(), "msg : Tensor had -Inf values");
    }
}
