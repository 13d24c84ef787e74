//! Cutting, joining and re-encoding strings: `Substr` (bytes or UTF-8
//! characters, a negative position counting from the end), `ReduceJoin`
//! (`tf.strings.reduce_join`: axes joined one after another, in the order
//! given), `UnsortedSegmentJoin` (`tf.strings.unsorted_segment_join`)
//! and web-safe base64 (`DecodeBase64`, `EncodeBase64`: the `-_`
//! alphabet TensorFlow uses, padding optional when decoding).
//!
//! Owns: these kernels and TensorFlow's bounds errors. Must not keep
//! state between steps.

use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or, index_values};
use crate::tensor::{DType, Tensor};
use base64::Engine;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Substr", substr_signature, build_substr),
    OpDef::kernel("ReduceJoin", reduce_join_signature, build_reduce_join),
    OpDef::kernel("UnsortedSegmentJoin", segment_join_signature, build_segment_join),
    OpDef::kernel("DecodeBase64", base64_signature, build_base64::<false>),
    OpDef::kernel("EncodeBase64", base64_signature, build_base64::<true>),
];

const STRING: ValueType = ValueType::Tensor(DType::String);

fn substr_signature(node: &NodeSpec) -> Result<OpSignature> {
    let index = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![STRING, index, index], vec![STRING]))
}

fn reduce_join_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![STRING, ValueType::Tensor(DType::I32)], vec![STRING]))
}

fn base64_signature(_node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(vec![STRING], vec![STRING]))
}

// ---------------------------------------------------------------------------
// Substr

struct Substr {
    utf8_chars: bool,
}

fn build_substr(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    let utf8_chars = match node.attr_str_or("unit", "BYTE")?.as_str() {
        "BYTE" => false,
        "UTF8_CHAR" => true,
        other => bail!(invalid_argument, "node '{}' ({}): unit '{other}' (BYTE or UTF8_CHAR)", node.name, node.op),
    };
    Ok(Box::new(Substr { utf8_chars }))
}

impl OpKernel for Substr {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let (pos, len) = (ctx.input(1)?, ctx.input(2)?);
        if pos.shape() != len.shape() {
            bail!(invalid_argument, "pos and len should have the same shape, got: {} vs. {}", pos.shape(), len.shape());
        }
        let scalar = pos.shape().rank() == 0;
        if !scalar && pos.shape() != input.shape() {
            bail!(
                unimplemented,
                "Substr broadcasting pos/len of shape {} against input of shape {} (same shape or scalars only)",
                pos.shape(),
                input.shape()
            );
        }
        let (positions, lengths) = (index_values(pos, "pos")?, index_values(len, "len")?);
        let strings = input.strings()?;
        let mut out = Vec::with_capacity(strings.len());
        for (i, s) in strings.iter().enumerate() {
            let at = if scalar { 0 } else { i };
            // Character boundaries in bytes, then the end.
            let bounds: Vec<usize> = if self.utf8_chars {
                s.iter().enumerate().filter(|(_, b)| (**b & 0xC0) != 0x80).map(|(at, _)| at).chain([s.len()]).collect()
            } else {
                (0..=s.len()).collect()
            };
            let units = bounds.len() as i64 - 1;
            let mut start = positions[at];
            if start.unsigned_abs() > units as u64 {
                bail!(
                    invalid_argument,
                    "pos {start} out of range for string b'{}' at index {i}",
                    String::from_utf8_lossy(s)
                );
            }
            if start < 0 {
                start += units;
            }
            // A negative length runs to the end, as an unsigned length would.
            let end = if lengths[at] < 0 { units } else { (start + lengths[at]).min(units) };
            out.push(s[bounds[start as usize]..bounds[end as usize]].to_vec());
        }
        ctx.set_output(0, Tensor::from_strings(input.shape().clone(), &out)?);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// UnsortedSegmentJoin

/// `[string, Tindices, Tnumsegments] -> [string]`.
fn segment_join_signature(node: &NodeSpec) -> Result<OpSignature> {
    let ids = ValueType::Tensor(attr_index_type_or(node, "Tindices", DType::I32)?);
    let num = ValueType::Tensor(attr_index_type_or(node, "Tnumsegments", DType::I32)?);
    Ok(OpSignature::new(vec![ValueType::Tensor(DType::String), ids, num], vec![ValueType::Tensor(DType::String)]))
}

/// `UnsortedSegmentJoin` (`tf.strings.unsorted_segment_join`): the rows
/// below `segment_ids`' dimensions joined per segment with `separator`,
/// in input order; a segment no row falls in is the empty string.
struct SegmentJoin {
    separator: Vec<u8>,
}

fn build_segment_join(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(SegmentJoin { separator: init.node.attr_str_or("separator", "")?.into_bytes() }))
}

impl OpKernel for SegmentJoin {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let (input, ids_t, num) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        if num.rank() != 0 {
            bail!(invalid_argument, "num_segments must be a scalar, got shape {}", num.shape());
        }
        let segments = index_values(num, "num_segments")?[0];
        if !input.dims().starts_with(ids_t.dims()) {
            bail!(
                invalid_argument,
                "data.shape = {} does not start with segment_ids.shape = {}",
                input.shape(),
                ids_t.shape()
            );
        }
        let ids = index_values(ids_t, "segment_ids")?;
        if let Some((i, id)) = ids.iter().enumerate().find(|&(_, &id)| id < 0 || id >= segments) {
            bail!(
                invalid_argument,
                "segment_ids are not allowed to exceed num_segments or to have negative values: segment_ids[{i}] = {id}, num_segments = {segments}"
            );
        }
        let segments = segments as usize;
        let row_dims = &input.dims()[ids_t.rank()..];
        let inner: usize = row_dims.iter().product();
        let strings = input.strings()?;
        let mut out: Vec<Option<Vec<u8>>> = vec![None; segments * inner];
        for (i, &id) in ids.iter().enumerate() {
            for j in 0..inner {
                let piece = strings.get(i * inner + j).unwrap_or_default();
                match &mut out[id as usize * inner + j] {
                    Some(joined) => {
                        joined.extend_from_slice(&self.separator);
                        joined.extend_from_slice(piece);
                    }
                    slot @ None => *slot = Some(piece.to_vec()),
                }
            }
        }
        let out: Vec<Vec<u8>> = out.into_iter().map(Option::unwrap_or_default).collect();
        let mut dims = vec![segments];
        dims.extend_from_slice(row_dims);
        ctx.set_output(0, Tensor::from_strings(dims.as_slice(), &out)?);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// ReduceJoin

struct ReduceJoin {
    keep_dims: bool,
    separator: Vec<u8>,
}

fn build_reduce_join(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let node = init.node;
    Ok(Box::new(ReduceJoin {
        keep_dims: node.attr_bool_or("keep_dims", false)?,
        separator: node.attr_str_or("separator", "")?.into_bytes(),
    }))
}

impl OpKernel for ReduceJoin {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let rank = input.shape().rank() as i64;
        let mut axes = Vec::new();
        for &axis in ctx.input(1)?.as_slice::<i32>()? {
            let axis = i64::from(axis);
            if axis < -rank || axis >= rank {
                bail!(invalid_argument, "Invalid reduction dimension {axis} for input with {rank} dimensions.");
            }
            let axis = if axis < 0 { axis + rank } else { axis } as usize;
            if axes.contains(&axis) {
                bail!(invalid_argument, "Duplicate reduction dimension {axis}");
            }
            axes.push(axis);
        }
        let mut dims = input.dims().to_vec();
        let mut values: Vec<Vec<u8>> = input.strings()?.iter().map(<[u8]>::to_vec).collect();
        // One axis at a time, in the order given (the join's order follows).
        for &axis in &axes {
            let outer: usize = dims[..axis].iter().product();
            let inner: usize = dims[axis + 1..].iter().product();
            let n = dims[axis];
            let mut joined = Vec::with_capacity(outer * inner);
            for o in 0..outer {
                for i in 0..inner {
                    let mut s = Vec::new();
                    for k in 0..n {
                        if k > 0 {
                            s.extend_from_slice(&self.separator);
                        }
                        s.extend_from_slice(&values[(o * n + k) * inner + i]);
                    }
                    joined.push(s);
                }
            }
            values = joined;
            dims[axis] = 1;
        }
        let out_dims: Vec<usize> = if self.keep_dims {
            dims
        } else {
            dims.iter().enumerate().filter(|(d, _)| !axes.contains(d)).map(|(_, &n)| n).collect()
        };
        ctx.set_output(0, Tensor::from_strings(out_dims.as_slice(), &values)?);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Base64

struct Base64<const ENCODE: bool> {
    pad: bool,
}

fn build_base64<const ENCODE: bool>(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(Base64::<ENCODE> { pad: init.node.attr_bool_or("pad", false)? }))
}

impl<const ENCODE: bool> OpKernel for Base64<ENCODE> {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
        let input = ctx.input(0)?;
        let strings = input.strings()?;
        let out: Vec<Vec<u8>> = if ENCODE {
            let engine = if self.pad { &URL_SAFE } else { &URL_SAFE_NO_PAD };
            strings.iter().map(|s| engine.encode(s).into_bytes()).collect()
        } else {
            strings
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let unpadded = s.strip_suffix(b"==").or_else(|| s.strip_suffix(b"=")).unwrap_or(s);
                    URL_SAFE_NO_PAD.decode(unpadded).map_err(|e| {
                        Status::invalid_argument(format!(
                            "Invalid character found in base64 (string {i}, '{}'): {e}",
                            String::from_utf8_lossy(s)
                        ))
                    })
                })
                .collect::<Result<_>>()?
        };
        ctx.set_output(0, Tensor::from_strings(input.shape().clone(), &out)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1};
    use crate::tensor::Tensor;

    #[test]
    fn segment_join_matches_tensorflow() {
        // tf.raw_ops.UnsortedSegmentJoin in TensorFlow 2.21, the same calls.
        let join = node("UnsortedSegmentJoin").attr("separator", AttrValue::Bytes(b":".to_vec()));
        let words = Tensor::from_strings([4].as_slice(), &["a", "b", "c", "d"]).unwrap();
        let ids = Tensor::from_slice::<i32>([4].as_slice(), &[1, 0, 1, 3]).unwrap();
        let out = run1(&join, &[words.clone(), ids, Tensor::scalar(4i32)]).unwrap();
        let got: Vec<&[u8]> = out.strings().unwrap().iter().collect();
        assert_eq!(got, [b"b".as_slice(), b"a:c", b"", b"d"]);
        let grid = Tensor::from_strings([2, 2].as_slice(), &["a", "b", "c", "d"]).unwrap();
        let ids = Tensor::from_slice::<i32>([2, 2].as_slice(), &[0, 1, 1, 1]).unwrap();
        let out = run1(&join, &[grid, ids, Tensor::scalar(2i32)]).unwrap();
        let got: Vec<&[u8]> = out.strings().unwrap().iter().collect();
        assert_eq!(got, [b"a".as_slice(), b"b:c:d"]);
        let bad = Tensor::from_slice::<i32>([4].as_slice(), &[2, 0, 0, 0]).unwrap();
        let e = run1(&join, &[words, bad, Tensor::scalar(2i32)]).unwrap_err();
        assert!(e.message.contains("not allowed to exceed num_segments"), "{e}");
    }
}
