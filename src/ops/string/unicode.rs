//! Strings as Unicode code points: `UnicodeDecode` and
//! `UnicodeDecodeWithOffsets` (strings → ragged rows of code points:
//! `tf.strings.unicode_split`, `unicode_decode`, Keras
//! `TextVectorization(split="character")`), `UnicodeEncode` (ragged rows
//! of code points → strings) and `StringLength` (bytes or UTF-8
//! characters). UTF-8 only.
//!
//! Owns: these kernels and TensorFlow's error modes: `replace` gives one
//! replacement character per maximal invalid subsequence (as ICU, which
//! TensorFlow decodes with, and Rust's `utf8_chunks`), `ignore` drops it,
//! `strict` fails naming the string. Must not keep state between steps.

use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::tensor::{DType, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("UnicodeDecode", decode_signature::<false>, build_decode::<false>),
    OpDef::kernel("UnicodeDecodeWithOffsets", decode_signature::<true>, build_decode::<true>),
    OpDef::kernel("UnicodeEncode", encode_signature, build_encode),
    OpDef::kernel("StringLength", length_signature, build_length),
];

const STRING: ValueType = ValueType::Tensor(DType::String);
const INT32: ValueType = ValueType::Tensor(DType::I32);
const INT64: ValueType = ValueType::Tensor(DType::I64);

fn splits_type(node: &NodeSpec) -> Result<ValueType> {
    Ok(ValueType::Tensor(node.attr_dtype_or("Tsplits", DType::I64)?))
}

/// `[string] -> [Tsplits row_splits, int32 char_values (, int64 starts)]`.
fn decode_signature<const OFFSETS: bool>(node: &NodeSpec) -> Result<OpSignature> {
    let mut outputs = vec![splits_type(node)?, INT32];
    if OFFSETS {
        outputs.push(INT64);
    }
    Ok(OpSignature::new(vec![STRING], outputs))
}

/// `[int32 input_values, Tsplits input_splits] -> [string]`.
fn encode_signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![INT32, splits_type(node)?], vec![STRING]))
}

fn length_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![STRING], vec![INT32]))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Errors {
    Strict,
    Replace,
    Ignore,
}

/// The node's `errors` and `replacement_char`, and that its encoding
/// (attr `encoding_attr`) is UTF-8.
fn error_mode(node: &NodeSpec, encoding_attr: &str) -> Result<(Errors, u32)> {
    let encoding = node.attr_str_or(encoding_attr, "UTF-8")?;
    if !matches!(encoding.to_ascii_uppercase().as_str(), "UTF-8" | "UTF8") {
        bail!(unimplemented, "node '{}' ({}): {encoding_attr} '{encoding}' (only UTF-8)", node.name, node.op);
    }
    let errors = match node.attr_str_or("errors", "replace")?.as_str() {
        "strict" => Errors::Strict,
        "replace" => Errors::Replace,
        "ignore" => Errors::Ignore,
        other => bail!(
            invalid_argument,
            "node '{}' ({}): errors '{other}' (expected strict, replace or ignore)",
            node.name,
            node.op
        ),
    };
    let replacement = node.attr_int_or("replacement_char", 0xFFFD)?;
    let replacement = u32::try_from(replacement).ok().filter(|&c| char::from_u32(c).is_some()).ok_or_else(|| {
        Status::invalid_argument(format!("node '{}': replacement_char {replacement} is not a code point", node.name))
    })?;
    Ok((errors, replacement))
}

/// Row splits as int64s from a Tsplits tensor.
fn splits_of(splits: &Tensor) -> Result<Vec<i64>> {
    match splits.dtype() {
        DType::I64 => Ok(splits.as_slice::<i64>()?.to_vec()),
        DType::I32 => Ok(splits.as_slice::<i32>()?.iter().map(|&s| i64::from(s)).collect()),
        other => bail!(invalid_argument, "row splits must be int32 or int64, got {other}"),
    }
}

/// Row splits as a Tsplits tensor.
fn splits_tensor(dtype: DType, splits: &[i64]) -> Result<Tensor> {
    match dtype {
        DType::I32 => {
            let narrow = splits
                .iter()
                .map(|&s| {
                    i32::try_from(s).map_err(|_| Status::invalid_argument(format!("row split {s} overflows int32")))
                })
                .collect::<Result<Vec<_>>>()?;
            Tensor::from_slice([narrow.len()], &narrow)
        }
        _ => Tensor::from_slice([splits.len()], splits),
    }
}

struct Decode<const OFFSETS: bool> {
    errors: Errors,
    replacement: u32,
    replace_control: bool,
    splits: DType,
    node: String,
}

fn build_decode<const OFFSETS: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let (errors, replacement) = error_mode(node, "input_encoding")?;
    Ok(Box::new(Decode::<OFFSETS> {
        errors,
        replacement,
        replace_control: node.attr_bool_or("replace_control_characters", false)?,
        splits: node.attr_dtype_or("Tsplits", DType::I64)?,
        node: node.name.clone(),
    }))
}

impl<const OFFSETS: bool> OpKernel for Decode<OFFSETS> {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let strings = input.strings()?;
        let mut splits = Vec::with_capacity(strings.len() + 1);
        let mut chars: Vec<i32> = Vec::new();
        let mut starts: Vec<i64> = Vec::new();
        splits.push(0i64);
        for (i, s) in strings.iter().enumerate() {
            let mut offset = 0usize;
            for chunk in s.utf8_chunks() {
                for (at, c) in chunk.valid().char_indices() {
                    let c = c as u32;
                    let c = if self.replace_control && c < 0x20 { self.replacement } else { c };
                    chars.push(c as i32);
                    if OFFSETS {
                        starts.push((offset + at) as i64);
                    }
                }
                offset += chunk.valid().len();
                if !chunk.invalid().is_empty() {
                    match self.errors {
                        Errors::Strict => bail!(
                            invalid_argument,
                            "node '{}': string {i} is not valid UTF-8 at byte {offset}: {:?}",
                            self.node,
                            String::from_utf8_lossy(s)
                        ),
                        Errors::Replace => {
                            chars.push(self.replacement as i32);
                            if OFFSETS {
                                starts.push(offset as i64);
                            }
                        }
                        Errors::Ignore => {}
                    }
                    offset += chunk.invalid().len();
                }
            }
            splits.push(chars.len() as i64);
        }
        ctx.set_output(0, splits_tensor(self.splits, &splits)?);
        ctx.set_output(1, Tensor::from_slice([chars.len()], &chars)?);
        if OFFSETS {
            ctx.set_output(2, Tensor::from_slice([starts.len()], &starts)?);
        }
        Ok(())
    }
}

struct Encode {
    errors: Errors,
    replacement: u32,
    node: String,
}

fn build_encode(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let (errors, replacement) = error_mode(node, "output_encoding")?;
    Ok(Box::new(Encode { errors, replacement, node: node.name.clone() }))
}

impl OpKernel for Encode {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let values = ctx.input(0)?.as_slice::<i32>()?;
        let splits = splits_of(ctx.input(1)?)?;
        if splits.first() != Some(&0) || splits.last().is_some_and(|&end| end as usize != values.len()) {
            bail!(
                invalid_argument,
                "node '{}': input_splits must start at 0 and end at the {} values, got {:?}",
                self.node,
                values.len(),
                (splits.first(), splits.last())
            );
        }
        let mut strings = Vec::with_capacity(splits.len().saturating_sub(1));
        for (row, pair) in splits.windows(2).enumerate() {
            let (start, end) = (pair[0], pair[1]);
            if start > end {
                bail!(invalid_argument, "node '{}': input_splits decrease at row {row} ({start} > {end})", self.node);
            }
            let mut text = String::with_capacity((end - start) as usize);
            for &code in &values[start as usize..end as usize] {
                match u32::try_from(code).ok().and_then(char::from_u32) {
                    Some(c) => text.push(c),
                    None => match self.errors {
                        Errors::Strict => bail!(
                            invalid_argument,
                            "node '{}': {code} in row {row} is not a Unicode code point",
                            self.node
                        ),
                        Errors::Replace => text.push(char::from_u32(self.replacement).unwrap_or('\u{FFFD}')),
                        Errors::Ignore => {}
                    },
                }
            }
            strings.push(text.into_bytes());
        }
        ctx.set_output(0, Tensor::from_strings([strings.len()], &strings)?);
        Ok(())
    }
}

struct Length {
    utf8_chars: bool,
}

fn build_length(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let utf8_chars = match node.attr_str_or("unit", "BYTE")?.as_str() {
        "BYTE" => false,
        "UTF8_CHAR" => true,
        other => bail!(invalid_argument, "node '{}' ({}): unit '{other}' (BYTE or UTF8_CHAR)", node.name, node.op),
    };
    Ok(Box::new(Length { utf8_chars }))
}

impl OpKernel for Length {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let lengths: Vec<i32> = input
            .strings()?
            .iter()
            .map(|s| {
                // TensorFlow counts the bytes that do not continue a
                // character: invalid bytes count as characters too.
                let n = if self.utf8_chars { s.iter().filter(|&&b| (b & 0xC0) != 0x80).count() } else { s.len() };
                n as i32
            })
            .collect();
        ctx.set_output(0, Tensor::from_slice(input.shape().clone(), &lengths)?);
        Ok(())
    }
}
