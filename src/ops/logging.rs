//! `Assert`: the op behind `tf.debugging.assert_*`, `tf.Assert` and the
//! checks inside `tf.image.psnr`/`ssim`. It passes when its condition is
//! true and otherwise fails the step with TensorFlow's message: "assertion
//! failed: " and each data tensor summarized in brackets, at most
//! `summarize` elements each, numbers printed as TensorFlow prints them.
//!
//! Owns: the kernel and the summary format. Must not hold state.

use super::registry::OpDef;
use super::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::{DataType, NodeSpec};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[OpDef::kernel("Assert", assert_signature, build_assert)];

/// `[bool, T...] -> []`.
fn assert_signature(node: &NodeSpec) -> Result<OpSignature> {
    let mut inputs = vec![ValueType::Tensor(DType::Bool)];
    for t in node.attr_type_list("T")? {
        match t {
            DataType::Tensor(d) => inputs.push(ValueType::Tensor(d)),
            other => {
                return Err(Status::unimplemented(format!(
                    "node '{}' (Assert): a data input of {other}, which has no printed form here",
                    node.name
                )));
            }
        }
    }
    Ok(OpSignature::new(inputs, vec![]))
}

struct Assert {
    summarize: usize,
}

fn build_assert(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let summarize = init.node.attr_int_or("summarize", 3)?;
    // TensorFlow prints every element for a negative count.
    Ok(Box::new(Assert { summarize: usize::try_from(summarize).unwrap_or(usize::MAX) }))
}

impl OpKernel for Assert {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let condition = ctx.input(0)?;
        if condition.rank() != 0 {
            bail!(invalid_argument, "In[0] should be a scalar: {}", condition.shape());
        }
        if condition.scalar_value::<bool>()? {
            return Ok(());
        }
        let mut message = String::from("assertion failed:");
        for i in 1..ctx.num_inputs() {
            message.push_str(" [");
            message.push_str(&summarize(ctx.input(i)?, self.summarize)?);
            message.push(']');
        }
        Err(Status::invalid_argument(message))
    }
}

/// TensorFlow's `Tensor::SummarizeValue`: the first `limit` elements,
/// nested in brackets by dimension (the outermost left bare), "..." where
/// elements were left out.
pub fn summarize(tensor: &Tensor, limit: usize) -> Result<String> {
    let elements = element_strings(tensor, limit)?;
    let total = tensor.num_elements();
    let mut out = String::new();
    if tensor.rank() == 0 {
        out.push_str(elements.first().map_or("", String::as_str));
    } else {
        let mut next = 0;
        print_dim(tensor.dims(), 0, &elements, &mut next, &mut out);
    }
    if total > elements.len() {
        out.push_str("...");
    }
    Ok(out)
}

/// One dimension of [`summarize`]: the innermost prints elements, the
/// others bracket each of their entries while elements are left to print.
fn print_dim(dims: &[usize], dim: usize, elements: &[String], next: &mut usize, out: &mut String) {
    let limit = elements.len();
    if *next >= limit {
        return;
    }
    if dim == dims.len() - 1 {
        for i in 0..dims[dim] {
            if *next >= limit {
                if dim != 0 {
                    out.push_str("...");
                }
                return;
            }
            if i > 0 {
                out.push(' ');
            }
            out.push_str(&elements[*next]);
            *next += 1;
        }
        return;
    }
    for _ in 0..dims[dim] {
        let opened = *next < limit;
        if opened {
            out.push('[');
        }
        print_dim(dims, dim + 1, elements, next, out);
        if opened || *next < limit {
            out.push(']');
        }
    }
}

/// The first `limit` elements as TensorFlow prints them.
fn element_strings(tensor: &Tensor, limit: usize) -> Result<Vec<String>> {
    let n = tensor.num_elements().min(limit);
    Ok(match tensor.dtype() {
        DType::F32 => tensor.as_slice::<f32>()?[..n].iter().map(|&x| format_f32(x)).collect(),
        DType::F64 => tensor.as_slice::<f64>()?[..n].iter().map(|&x| format_f64(x)).collect(),
        DType::I32 => tensor.as_slice::<i32>()?[..n].iter().map(i32::to_string).collect(),
        DType::I64 => tensor.as_slice::<i64>()?[..n].iter().map(i64::to_string).collect(),
        DType::U8 => tensor.as_slice::<u8>()?[..n].iter().map(u8::to_string).collect(),
        DType::U64 => tensor.as_slice::<u64>()?[..n].iter().map(u64::to_string).collect(),
        // TensorFlow prints a complex number as "(re,im)".
        DType::Complex64 => tensor.complex_parts()[..n]
            .iter()
            .map(|&(re, im)| format!("({},{})", format_f32(re), format_f32(im)))
            .collect(),
        DType::Bool => tensor.as_slice::<bool>()?[..n].iter().map(|&b| if b { "1" } else { "0" }.to_string()).collect(),
        DType::String => tensor.strings()?.iter().take(n).map(c_escape).collect(),
    })
}

/// C's `%.6g`, or `%.9g` where six digits do not give the float back.
fn format_f32(x: f32) -> String {
    let short = format_g(x as f64, 6);
    if short.parse::<f32>().ok() == Some(x) { short } else { format_g(x as f64, 9) }
}

/// C's `%.15g`, or `%.17g` where fifteen digits do not give the double back.
fn format_f64(x: f64) -> String {
    let short = format_g(x, 15);
    if short.parse::<f64>().ok() == Some(x) { short } else { format_g(x, 17) }
}

/// C's `%.{precision}g`: scientific when the exponent is below −4 or at
/// least `precision`, trailing zeros dropped, a two-digit exponent at least.
fn format_g(x: f64, precision: usize) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // The exponent after rounding to `precision` significant digits.
    let scientific = format!("{:.*e}", precision - 1, x);
    let (mantissa, exponent) = scientific.split_once('e').expect("`{:e}` always writes an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` writes a decimal exponent");
    if exponent < -4 || exponent >= precision as i32 {
        let mantissa = trim_zeros(mantissa);
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    } else {
        let decimals = (precision as i32 - 1 - exponent).max(0) as usize;
        trim_zeros(&format!("{x:.decimals$}")).to_string()
    }
}

fn trim_zeros(digits: &str) -> &str {
    if digits.contains('.') { digits.trim_end_matches('0').trim_end_matches('.') } else { digits }
}

/// A string's bytes as C escapes print them (`absl::Utf8SafeCEscape`):
/// quotes, backslashes and control bytes escaped, UTF-8 kept.
fn c_escape(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '"' => out.push_str("\\\""),
                '\'' => out.push_str("\\'"),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\{:03o}", c as u32)),
                c => out.push(c),
            }
        }
        for &b in chunk.invalid() {
            out.push_str(&format!("\\{b:03o}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::{AttrList, AttrValue};
    use crate::ops::testing::node;
    use crate::ops::{ResourceMgr, Value, run_kernel_once};

    fn assert_node(types: &[DType], summarize: i64) -> NodeSpec {
        let list = types.iter().map(|&d| DataType::Tensor(d)).collect();
        node("Assert").attr("T", AttrValue::List(AttrList::Type(list))).attr("summarize", AttrValue::Int(summarize))
    }

    fn run(condition: Tensor, data: Vec<Tensor>, summarize: i64) -> Result<()> {
        let types: Vec<DType> = data.iter().map(Tensor::dtype).collect();
        let inputs = std::iter::once(condition).chain(data).map(Value::Tensor).collect();
        let outputs = run_kernel_once(&assert_node(&types, summarize), inputs, &ResourceMgr::default())?;
        assert!(outputs.is_empty());
        Ok(())
    }

    #[test]
    fn a_failed_assertion_prints_its_data_as_tensorflow_does() {
        let data = || {
            vec![
                Tensor::string_scalar("x is"),
                Tensor::from_slice::<i32>([5], &[1, 2, 3, 4, 5]).unwrap(),
                Tensor::from_slice::<f32>([2, 2], &[1.5, 2.0, 3.0, 4.0]).unwrap(),
                Tensor::scalar(true),
            ]
        };
        run(Tensor::scalar(true), data(), 3).unwrap();
        let err = run(Tensor::scalar(false), data(), 3).unwrap_err();
        // TensorFlow 2.21's message for the same Assert.
        assert_eq!(err.message, "assertion failed: [x is] [1 2 3...] [[1.5 2][3...]...] [1]");
        let all = run(Tensor::scalar(false), data(), -1).unwrap_err();
        assert_eq!(all.message, "assertion failed: [x is] [1 2 3 4 5] [[1.5 2][3 4]] [1]");
    }

    #[test]
    fn the_condition_must_be_a_scalar() {
        let err = run(Tensor::from_slice::<bool>([1], &[false]).unwrap(), vec![], 3).unwrap_err();
        assert_eq!(err.message, "In[0] should be a scalar: [1]");
    }

    #[test]
    fn numbers_print_as_c_s_shortest_g() {
        assert_eq!(format_f32(0.1), "0.1");
        assert_eq!(format_f32(1e-7), "1e-07");
        assert_eq!(format_f32(123456.0), "123456");
        assert_eq!(format_f32(1234567.0), "1234567");
        assert_eq!(format_f32(3.4028235e38), "3.40282347e+38");
        assert_eq!(format_f32(-0.0), "-0");
        assert_eq!(format_f32(f32::NEG_INFINITY), "-inf");
        assert_eq!(format_f64(0.1), "0.1");
        assert_eq!(format_f64(1.0 / 3.0), "0.33333333333333331");
        assert_eq!(format_g(0.0001, 6), "0.0001");
        assert_eq!(format_g(100.0, 6), "100");
        assert_eq!(c_escape(b"a\n\"b\"\xff"), "a\\n\\\"b\\\"\\377");
    }
}
