//! How TensorFlow prints a tensor (`Tensor::SummarizeValue`), in both of
//! its forms: the legacy one of `Assert` and `tf.compat.v1.Print` (the
//! first elements in row-major order, nested brackets closing early) and
//! the numpy-like one of `tf.print` and `tf.strings.format` (every
//! dimension bracketed, its first and last entries kept, strings quoted).
//! Numbers print as C's shortest `%g` that gives the value back.
//!
//! Owns: the text of a tensor. Must not print or hold state.

use crate::error::Result;
use crate::tensor::{DType, Tensor};

/// TensorFlow's `Tensor::SummarizeValue`: the first `limit` elements,
/// nested in brackets by dimension (the outermost left bare), "..." where
/// elements were left out.
pub fn summarize_v1(tensor: &Tensor, limit: usize) -> Result<String> {
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
        DType::F16 => tensor.as_slice::<half::f16>()?[..n].iter().map(|x| format_f32(x.to_f32())).collect(),
        DType::BF16 => tensor.as_slice::<half::bf16>()?[..n].iter().map(|x| format_f32(x.to_f32())).collect(),
        DType::I8 | DType::I16 | DType::U16 | DType::U32 => {
            tensor.to_f64_vec()[..n].iter().map(|&x| (x as i64).to_string()).collect()
        }
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
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
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

/// TensorFlow's `SummarizeValue` as `print_v2` writes it (`tf.print`,
/// `tf.strings.format`): each dimension in brackets, at most `summarize`
/// entries at each of its ends with "..." between (a negative count keeps
/// all), entries of the innermost dimension apart by a space, of outer ones
/// by newlines and an indent.
pub fn summarize_v2(tensor: &Tensor, summarize: i64) -> Result<String> {
    let total = tensor.num_elements();
    let max_entries = usize::try_from(summarize).unwrap_or(total);
    let limit = max_entries.min(total);
    let element = element_printer(tensor)?;
    let mut out = String::new();
    let Some(element) = element else {
        // Types TensorFlow has no printed form for: a "?" for each entry.
        let bracketed = tensor.rank() > 0;
        if bracketed {
            out.push('[');
        }
        out.push_str(&vec!["?"; limit].join(" "));
        if max_entries < total {
            out.push_str("...");
        }
        if bracketed {
            out.push(']');
        }
        return Ok(out);
    };
    if tensor.rank() == 0 {
        for i in 0..limit {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(&element(i));
        }
        if total > limit {
            out.push_str("...");
        }
        return Ok(out);
    }
    print_dim_v2(tensor.dims(), 0, limit, 0, &*element, &mut out);
    Ok(out)
}

/// One dimension of [`summarize_v2`], its entries starting at element `at`.
fn print_dim_v2(
    dims: &[usize],
    dim: usize,
    at_ends: usize,
    at: usize,
    element: &dyn Fn(usize) -> String,
    out: &mut String,
) {
    if dim == dims.len() {
        out.push_str(&element(at));
        return;
    }
    out.push('[');
    let count = dims[dim];
    let stride: usize = dims[dim + 1..].iter().product();
    for i in 0..at_ends.min(count) {
        if i > 0 {
            dim_spacing(dim, dims.len(), out);
        }
        print_dim_v2(dims, dim + 1, at_ends, at + stride * i, element, out);
    }
    if count > 2 * at_ends {
        dim_spacing(dim, dims.len(), out);
        out.push_str("...");
    }
    for i in at_ends.max(count.saturating_sub(at_ends))..count {
        dim_spacing(dim, dims.len(), out);
        print_dim_v2(dims, dim + 1, at_ends, at + stride * i, element, out);
    }
    out.push(']');
}

/// Between two entries of dimension `dim` of `rank`: a space in the
/// innermost, else a newline for each dimension inside it and an indent.
fn dim_spacing(dim: usize, rank: usize, out: &mut String) {
    if dim == rank - 1 {
        out.push(' ');
        return;
    }
    out.extend(std::iter::repeat_n('\n', rank - dim - 1));
    out.extend(std::iter::repeat_n(' ', dim + 1));
}

/// Element `i` as `print_v2` prints it, or `None` for a type TensorFlow
/// prints as "?".
#[allow(clippy::type_complexity)]
fn element_printer(tensor: &Tensor) -> Result<Option<Box<dyn Fn(usize) -> String + '_>>> {
    Ok(Some(match tensor.dtype() {
        DType::F32 => {
            let v = tensor.as_slice::<f32>()?;
            Box::new(move |i| format_f32(v[i]))
        }
        DType::F64 => {
            let v = tensor.as_slice::<f64>()?;
            Box::new(move |i| format_f64(v[i]))
        }
        DType::I32 => {
            let v = tensor.as_slice::<i32>()?;
            Box::new(move |i| v[i].to_string())
        }
        DType::I64 => {
            let v = tensor.as_slice::<i64>()?;
            Box::new(move |i| v[i].to_string())
        }
        DType::U8 => {
            let v = tensor.as_slice::<u8>()?;
            Box::new(move |i| v[i].to_string())
        }
        DType::U64 => {
            let v = tensor.as_slice::<u64>()?;
            Box::new(move |i| v[i].to_string())
        }
        DType::F16 => {
            let v = tensor.as_slice::<half::f16>()?;
            Box::new(move |i| format_f32(v[i].to_f32()))
        }
        DType::BF16 => {
            let v = tensor.as_slice::<half::bf16>()?;
            Box::new(move |i| format_f32(v[i].to_f32()))
        }
        DType::I8 | DType::I16 | DType::U16 | DType::U32 => {
            let v = tensor.to_f64_vec();
            Box::new(move |i| (v[i] as i64).to_string())
        }
        DType::Bool => {
            let v = tensor.as_slice::<bool>()?;
            Box::new(move |i| if v[i] { "1" } else { "0" }.to_string())
        }
        DType::String => {
            let v = tensor.strings()?;
            Box::new(move |i| format!("\"{}\"", c_escape(v.get(i).unwrap_or_default())))
        }
        DType::Complex64 => return Ok(None),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
