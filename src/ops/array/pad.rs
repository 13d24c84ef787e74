//! Padding: Pad (zeros, false for bool), PadV2 (a scalar `constant_values`)
//! and MirrorPad (REFLECT: the edge is not repeated; SYMMETRIC: it is), with
//! `paddings` an int32 or int64 `[rank, 2]` matrix of (before, after)
//! amounts; every dtype, any rank.
//!
//! Owns: these kernels. Must not hold state beyond parsed attributes.
//!
//! No padding at all forwards the input without a copy, as TensorFlow does.
//! Otherwise trailing dimensions without padding are merged first (so
//! NHWC spatial padding copies whole `w * c` rows), and the input is copied
//! into place run by run; MirrorPad then copies each mirrored slab from the
//! output slab it reflects, innermost dimension first, so every element is
//! written about once.
//!
//! A superset of TensorFlow: its CPU kernels stop at rank 8 (Pad) and
//! rank 5 (MirrorPad); these take any rank.

use crate::bail;
use crate::dispatch_dtype;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{ComputeFn, FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or};
use crate::tensor::{DType, Element, Shape, Tensor};
use smallvec::SmallVec;

/// Dimension sizes, and (before, after) amounts per dimension.
type Dims = SmallVec<[usize; 8]>;
type Pads = SmallVec<[(usize, usize); 8]>;

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Pad", pad_signature, build_pad),
    OpDef::kernel("PadV2", pad_v2_signature, build_pad_v2),
    OpDef::kernel("MirrorPad", pad_signature, build_mirror_pad),
];

/// `[T, Tpaddings] -> [T]`.
fn pad_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let p = ValueType::Tensor(attr_index_type_or(node, "Tpaddings", crate::tensor::DType::I32)?);
    Ok(OpSignature::new(vec![t, p], vec![t]))
}

/// `[T, Tpaddings, T] -> [T]`.
fn pad_v2_signature(node: &NodeSpec) -> Result<OpSignature> {
    let mut sig = pad_signature(node)?;
    sig.inputs.push(sig.outputs[0]);
    Ok(sig)
}

fn build_pad(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[0]);
        return crate::ops::array::string_moves::build(init, "T", carriers, build_pad);
    }
    let compute: ComputeFn = match init.node.attr_dtype("T")? {
        DType::Complex64 => pad_complex::<false>,
        dtype => dispatch_dtype!(dtype, T => pad::<T, false>),
    };
    Ok(FnKernel::boxed(compute))
}

fn build_pad_v2(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[0, 2]);
        return crate::ops::array::string_moves::build(init, "T", carriers, build_pad_v2);
    }
    let compute: ComputeFn = match init.node.attr_dtype("T")? {
        DType::Complex64 => pad_complex::<true>,
        dtype => dispatch_dtype!(dtype, T => pad::<T, true>),
    };
    Ok(FnKernel::boxed(compute))
}

/// REFLECT leaves out the edge element (offset 1), SYMMETRIC repeats it (0).
struct MirrorPadKernel {
    compute: fn(Tensor, &Tensor, usize) -> Result<Tensor>,
    offset: usize,
}

fn build_mirror_pad(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[0]);
        return crate::ops::array::string_moves::build(init, "T", carriers, build_mirror_pad);
    }
    let offset = match init.node.attr_str_or("mode", "")?.as_str() {
        "REFLECT" => 1,
        "SYMMETRIC" => 0,
        other => bail!(
            invalid_argument,
            "Value for attr 'mode' of \"{other}\" is not in the list of allowed values: \"REFLECT\", \"SYMMETRIC\""
        ),
    };
    let compute = dispatch_dtype!(init.node.attr_dtype("T")?, T => mirror_pad::<T>);
    Ok(Box::new(MirrorPadKernel { compute, offset }))
}

impl OpKernel for MirrorPadKernel {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.take_input(0)?;
        let out = (self.compute)(input, ctx.input(1)?, self.offset)?;
        ctx.set_output(0, out);
        Ok(())
    }
}

/// The (before, after) amounts per dimension, checked against `input`
/// with TensorFlow's messages; `mirror` selects MirrorPad's wording.
fn read_paddings(input: &Tensor, paddings: &Tensor, mirror: bool) -> Result<Pads> {
    let pd = paddings.dims();
    if pd.len() != 2 || pd[1] != 2 {
        bail!(invalid_argument, "paddings must be a matrix with 2 columns: {}", paddings.shape());
    }
    if pd[0] != input.rank() {
        let sep = if mirror { ", " } else { " " };
        bail!(
            invalid_argument,
            "The first dimension of paddings must be the rank of inputs{}{sep}{}",
            paddings.shape(),
            input.shape()
        );
    }
    let values = crate::ops::index_values(paddings, "paddings")?;
    let mut out = SmallVec::new();
    for pair in values.chunks_exact(2) {
        let (before, after) = (pair[0], pair[1]);
        if before < 0 || after < 0 {
            let word = if mirror { "paddings" } else { "Paddings" };
            bail!(invalid_argument, "{word} must be non-negative: {before} {after}");
        }
        let fit = |v: i64| usize::try_from(v).map_err(|_| Status::invalid_argument(format!("padding {v} too large")));
        out.push((fit(before)?, fit(after)?));
    }
    Ok(out)
}

/// The padded shape, or an error if it overflows (so every product of
/// its parts, padding included, fits in usize).
fn padded_shape(dims: &[usize], pads: &[(usize, usize)]) -> Result<Shape> {
    let padded: Dims = dims
        .iter()
        .zip(pads)
        .map(|(&d, &(b, a))| d.checked_add(b).and_then(|v| v.checked_add(a)))
        .collect::<Option<_>>()
        .ok_or_else(|| Status::invalid_argument(format!("padding {pads:?} of shape {dims:?} overflows")))?;
    let shape = Shape::new(&padded);
    if shape.checked_num_elements().is_none() {
        bail!(invalid_argument, "padded shape {shape} overflows");
    }
    Ok(shape)
}

/// Merges each trailing unpadded dimension into the one before it.
fn merge_trailing(dims: &[usize], pads: &[(usize, usize)]) -> (Dims, Pads) {
    let (mut dims, mut pads): (Dims, Pads) = (dims.iter().copied().collect(), pads.iter().copied().collect());
    while dims.len() >= 2 && pads.last() == Some(&(0, 0)) {
        pads.pop();
        let last = dims.pop().unwrap_or(1);
        let i = dims.len() - 1;
        dims[i] *= last;
        pads[i] = (pads[i].0 * last, pads[i].1 * last);
    }
    (dims, pads)
}

fn pad<T: Element, const V2: bool>(ctx: &mut OpContext<'_>) -> Result<()> {
    let input = ctx.take_input(0)?;
    let value = if V2 { Some(constant_value(ctx.input(2)?)?.clone()) } else { None };
    let out = pad_tensor::<T>(input, ctx.input(1)?, value.as_ref())?;
    ctx.set_output(0, out);
    Ok(())
}

/// A complex64 pad: elements move as the uint64 of their bits, and the
/// bits of zero are zero (a spectrum padded to a longer `fft_length`).
fn pad_complex<const V2: bool>(ctx: &mut OpContext<'_>) -> Result<()> {
    let bits = |t: &Tensor| Tensor::from_bytes(DType::U64, t.shape().clone(), t.as_bytes());
    let input = bits(&ctx.take_input(0)?)?;
    let value = if V2 { Some(bits(constant_value(ctx.input(2)?)?)?) } else { None };
    let out = pad_tensor::<u64>(input, ctx.input(1)?, value.as_ref())?;
    ctx.set_output(0, Tensor::from_bytes(DType::Complex64, out.shape().clone(), out.as_bytes())?);
    Ok(())
}

/// PadV2's `constant_values`, which must be a scalar.
fn constant_value(c: &Tensor) -> Result<&Tensor> {
    if c.rank() != 0 {
        bail!(invalid_argument, "constant_values must be a scalar. Found: {}", c.shape());
    }
    Ok(c)
}

/// `input` padded as `paddings` says, with `value` (a scalar) or zeros.
fn pad_tensor<T: Element>(input: Tensor, paddings: &Tensor, value: Option<&Tensor>) -> Result<Tensor> {
    let pads = read_paddings(&input, paddings, false)?;
    let value = value.map(|c| c.scalar_value::<T>()).transpose()?;
    if pads.iter().all(|&p| p == (0, 0)) {
        return Ok(input);
    }
    let out_shape = padded_shape(input.dims(), &pads)?;
    let (dims, pads) = merge_trailing(input.dims(), &pads);
    let src = input.as_slice::<T>()?;
    // Zeroed, which is Pad's value (false for bool); PadV2 fills its own.
    Tensor::build::<T>(out_shape, |out| {
        if let Some(value) = value {
            out.fill(value);
        }
        place(src, &dims, &pads, out);
    })
}

/// Copies `src` (of `dims`) into `out` (of the padded dims) at offset
/// `before` in every dimension, leaving the padding as it was.
fn place<T: Copy>(src: &[T], dims: &[usize], pads: &[(usize, usize)], out: &mut [T]) {
    if out.is_empty() {
        return;
    }
    let (d, (before, after)) = (dims[0], pads[0]);
    if dims.len() == 1 {
        out[before..before + d].copy_from_slice(src);
        return;
    }
    if d == 0 || src.is_empty() {
        return;
    }
    let inner_in = src.len() / d;
    let inner_out = out.len() / (before + d + after);
    for (i, src_run) in src.chunks_exact(inner_in).enumerate() {
        let at = (before + i) * inner_out;
        place(src_run, &dims[1..], &pads[1..], &mut out[at..at + inner_out]);
    }
}

fn mirror_pad<T: Element>(input: Tensor, paddings: &Tensor, offset: usize) -> Result<Tensor> {
    let pads = read_paddings(&input, paddings, true)?;
    for (&d, &(before, after)) in input.dims().iter().zip(&pads) {
        // REFLECT needs before, after < d; SYMMETRIC before, after <= d.
        if before + offset > d || after + offset > d {
            if offset == 1 {
                bail!(
                    invalid_argument,
                    "paddings must be less than the dimension size: {before}, {after} not less than {d}"
                );
            }
            bail!(
                invalid_argument,
                "paddings must be no greater than the dimension size: {before}, {after} greater than {d}"
            );
        }
    }
    if pads.iter().all(|&p| p == (0, 0)) {
        return Ok(input);
    }
    let out_shape = padded_shape(input.dims(), &pads)?;
    // Trailing unpadded dimensions become the unit that is mirrored whole.
    let padded_rank = pads.iter().rposition(|&p| p != (0, 0)).map_or(0, |i| i + 1);
    let unit: usize = input.dims()[padded_rank..].iter().product();
    let (dims, pads) = (&input.dims()[..padded_rank], &pads[..padded_rank]);
    let src = input.as_slice::<T>()?;
    Tensor::build::<T>(out_shape, |out| mirror(src, dims, pads, offset, unit, out))
}

/// Writes `src` (of `dims`, each element a run of `unit`) padded by
/// reflection into `out`: the middle slabs by recursion, then each edge
/// slab copied from the written slab it mirrors.
fn mirror<T: Copy>(src: &[T], dims: &[usize], pads: &[(usize, usize)], offset: usize, unit: usize, out: &mut [T]) {
    let (d, (before, after)) = (dims[0], pads[0]);
    if out.is_empty() {
        return;
    }
    let slab = out.len() / (before + d + after);
    if dims.len() == 1 {
        out[before * unit..(before + d) * unit].copy_from_slice(src);
    } else {
        let inner_in = src.len() / d;
        for (i, src_run) in src.chunks_exact(inner_in).enumerate() {
            let at = (before + i) * slab;
            mirror(src_run, &dims[1..], &pads[1..], offset, unit, &mut out[at..at + slab]);
        }
    }
    // Output slab j < before shows input slab before - j - 1 + offset, which
    // is output slab 2 * before - j - 1 + offset; output slab before + d + k
    // shows input slab d - 1 - offset - k.
    for j in 0..before {
        let from = (2 * before - j - 1 + offset) * slab;
        out.copy_within(from..from + slab, j * slab);
    }
    for k in 0..after {
        let from = (before + d - 1 - offset - k) * slab;
        out.copy_within(from..from + slab, (before + d + k) * slab);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};
    use crate::tensor::DType;

    fn pads32(v: &[[i32; 2]]) -> Tensor {
        Tensor::from_slice::<i32>([v.len(), 2], &v.concat()).unwrap()
    }

    fn pads64(v: &[[i64; 2]]) -> Tensor {
        Tensor::from_slice::<i64>([v.len(), 2], &v.concat()).unwrap()
    }

    fn pad_node(dtype: DType) -> NodeSpec {
        node("Pad").attr("T", ty(dtype))
    }

    fn mirror_node(dtype: DType, mode: &str) -> NodeSpec {
        node("MirrorPad").attr("T", ty(dtype)).attr("mode", AttrValue::Bytes(mode.as_bytes().to_vec()))
    }

    /// 0..6 as `[2, 3]`.
    fn six() -> Tensor {
        Tensor::from_slice::<f32>([2, 3], &[0., 1., 2., 3., 4., 5.]).unwrap()
    }

    // Expected values: TensorFlow 2.21's Pad, PadV2 and MirrorPad.
    #[test]
    fn pad_and_pad_v2() {
        let i64_pads = pad_node(DType::F32).attr("Tpaddings", ty(DType::I64));
        let out = run1(&i64_pads, &[six(), pads64(&[[1, 0], [2, 1]])]).unwrap();
        assert_eq!(out.dims(), &[3, 6]);
        let want = [0., 0., 0., 0., 0., 0., 0., 0., 0., 1., 2., 0., 0., 0., 3., 4., 5., 0.];
        assert_eq!(out.as_slice::<f32>().unwrap(), &want);
        let v2 = node("PadV2").attr("T", ty(DType::F32));
        let out = run1(&v2, &[six(), pads32(&[[1, 0], [0, 1]]), Tensor::scalar(7f32)]).unwrap();
        assert_eq!(out.as_slice::<f32>().unwrap(), &[7., 7., 7., 7., 0., 1., 2., 7., 3., 4., 5., 7.]);
        // -0.0 is a value of its own.
        let out = run1(&v2, &[six(), pads32(&[[0, 0], [1, 0]]), Tensor::scalar(-0f32)]).unwrap();
        assert!(out.as_slice::<f32>().unwrap()[0].is_sign_negative());
        let b = Tensor::from_slice::<bool>([2], &[true, false]).unwrap();
        let out =
            run1(&node("PadV2").attr("T", ty(DType::Bool)), &[b.clone(), pads32(&[[1, 1]]), Tensor::scalar(true)])
                .unwrap();
        assert_eq!(out.as_slice::<bool>().unwrap(), &[true, true, false, true]);
        let out = run1(&pad_node(DType::Bool), &[b, pads32(&[[0, 2]])]).unwrap();
        assert_eq!(out.as_slice::<bool>().unwrap(), &[true, false, false, false]);
        // Every integer type, every position of the padding.
        let x = Tensor::from_slice::<i64>([1, 2, 2], &[1, 2, 3, 4]).unwrap();
        let out = run1(&pad_node(DType::I64), &[x, pads32(&[[1, 0], [0, 1], [1, 0]])]).unwrap();
        assert_eq!(out.dims(), &[2, 3, 3]);
        assert_eq!(
            out.as_slice::<i64>().unwrap(),
            &[0; 9].iter().chain(&[0, 1, 2, 0, 3, 4, 0, 0, 0]).copied().collect::<Vec<_>>()[..]
        );
        let x = Tensor::from_slice::<i32>([3], &[5, 6, 7]).unwrap();
        let out = run1(&pad_node(DType::I32), &[x, pads32(&[[2, 1]])]).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), &[0, 0, 5, 6, 7, 0]);
        let x = Tensor::from_slice::<f64>([1, 1, 2, 1], &[1.5, 2.5]).unwrap();
        let out = run1(&pad_node(DType::F64), &[x, pads32(&[[0, 0], [1, 1], [1, 1], [0, 0]])]).unwrap();
        assert_eq!(out.dims(), &[1, 3, 4, 1]);
        assert_eq!(out.as_slice::<f64>().unwrap(), &[0., 0., 0., 0., 0., 1.5, 2.5, 0., 0., 0., 0., 0.]);
    }

    #[test]
    fn nhwc_spatial_padding_keeps_channels_together() {
        // ZeroPadding2D on [1, 2, 2, 3]: whole pixels of 3 channels move.
        let v: Vec<f32> = (1..=12).map(|i| i as f32).collect();
        let x = Tensor::from_slice::<f32>([1, 2, 2, 3], &v).unwrap();
        let out = run1(&pad_node(DType::F32), &[x, pads32(&[[0, 0], [1, 0], [0, 1], [0, 0]])]).unwrap();
        assert_eq!(out.dims(), &[1, 3, 3, 3]);
        let mut want = vec![0.0f32; 9];
        want.extend([1., 2., 3., 4., 5., 6., 0., 0., 0., 7., 8., 9., 10., 11., 12., 0., 0., 0.]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &want[..]);
    }

    #[test]
    fn no_padding_forwards_and_empty_inputs_pad() {
        let x = Tensor::from_slice::<f32>([40], &[1.5; 40]).unwrap();
        let out = run1(&pad_node(DType::F32), &[x.clone(), pads32(&[[0, 0]])]).unwrap();
        assert!(out.shares_bytes_with(&x));
        let out = run1(&mirror_node(DType::F32, "REFLECT"), &[x.clone(), pads32(&[[0, 0]])]).unwrap();
        assert!(out.shares_bytes_with(&x));
        let scalar = run1(&pad_node(DType::F32), &[Tensor::scalar(3f32), Tensor::zeros(DType::I32, [0, 2]).unwrap()]);
        assert_eq!(scalar.unwrap().as_slice::<f32>().unwrap(), &[3.]);
        let empty = Tensor::zeros(DType::F32, [0, 2]).unwrap();
        let out = run1(&pad_node(DType::F32), &[empty.clone(), pads32(&[[1, 1], [0, 1]])]).unwrap();
        assert_eq!(out.dims(), &[2, 3]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[0.; 6]);
        let out = run1(&pad_node(DType::F32), &[empty, pads32(&[[0, 0], [1, 1]])]).unwrap();
        assert_eq!(out.dims(), &[0, 4]);
    }

    #[test]
    fn mirror_pad_reflect_and_symmetric() {
        let out = run1(&mirror_node(DType::F32, "REFLECT"), &[six(), pads32(&[[1, 1], [2, 2]])]).unwrap();
        assert_eq!(out.dims(), &[4, 7]);
        let want = [
            5., 4., 3., 4., 5., 4., 3., 2., 1., 0., 1., 2., 1., 0., 5., 4., 3., 4., 5., 4., 3., 2., 1., 0., 1., 2., 1.,
            0.,
        ];
        assert_eq!(out.as_slice::<f32>().unwrap(), &want);
        let out = run1(&mirror_node(DType::F32, "SYMMETRIC"), &[six(), pads64(&[[2, 1], [3, 2]])]).unwrap();
        assert_eq!(out.dims(), &[5, 8]);
        let want = [
            5., 4., 3., 3., 4., 5., 5., 4., 2., 1., 0., 0., 1., 2., 2., 1., 2., 1., 0., 0., 1., 2., 2., 1., 5., 4., 3.,
            3., 4., 5., 5., 4., 5., 4., 3., 3., 4., 5., 5., 4.,
        ];
        assert_eq!(out.as_slice::<f32>().unwrap(), &want);
        // Rank 3, the last dimension padded, int32.
        let x = Tensor::from_slice::<i32>([2, 2, 2], &[0, 1, 2, 3, 4, 5, 6, 7]).unwrap();
        let out = run1(&mirror_node(DType::I32, "REFLECT"), &[x, pads32(&[[1, 0], [0, 1], [1, 1]])]).unwrap();
        assert_eq!(out.dims(), &[3, 3, 4]);
        let want = [
            5, 4, 5, 4, 7, 6, 7, 6, 5, 4, 5, 4, 1, 0, 1, 0, 3, 2, 3, 2, 1, 0, 1, 0, 5, 4, 5, 4, 7, 6, 7, 6, 5, 4, 5, 4,
        ];
        assert_eq!(out.as_slice::<i32>().unwrap(), &want);
        // Unpadded trailing channels are mirrored as whole pixels.
        let v: Vec<i64> = (0..12).collect();
        let x = Tensor::from_slice::<i64>([1, 3, 2, 2], &v).unwrap();
        let out = run1(&mirror_node(DType::I64, "SYMMETRIC"), &[x, pads32(&[[0, 0], [1, 0], [0, 2], [0, 0]])]).unwrap();
        assert_eq!(out.dims(), &[1, 4, 4, 2]);
        let row = |a: i64| [a, a + 1, a + 2, a + 3, a + 2, a + 3, a, a + 1];
        let want: Vec<i64> = [row(0), row(0), row(4), row(8)].concat();
        assert_eq!(out.as_slice::<i64>().unwrap(), &want[..]);
        let b = Tensor::from_slice::<bool>([3], &[true, false, false]).unwrap();
        let out = run1(&mirror_node(DType::Bool, "REFLECT"), &[b, pads32(&[[2, 1]])]).unwrap();
        assert_eq!(out.as_slice::<bool>().unwrap(), &[false, false, true, false, false, false]);
    }

    #[test]
    fn errors() {
        let p = pad_node(DType::F32);
        let msg = |n: &NodeSpec, inputs: &[Tensor]| run1(n, inputs).unwrap_err().into_message();
        assert_eq!(
            msg(&p, &[six(), pads32(&[[1, 0]])]),
            "The first dimension of paddings must be the rank of inputs[1,2] [2,3]"
        );
        let three = Tensor::from_slice::<i32>([2, 3], &[1, 0, 1, 0, 0, 0]).unwrap();
        assert_eq!(msg(&p, &[six(), three]), "paddings must be a matrix with 2 columns: [2,3]");
        let flat = Tensor::from_slice::<i32>([2], &[1, 0]).unwrap();
        assert_eq!(msg(&p, &[six(), flat]), "paddings must be a matrix with 2 columns: [2]");
        assert_eq!(msg(&p, &[six(), pads32(&[[1, 0], [-1, 0]])]), "Paddings must be non-negative: -1 0");
        let v2 = node("PadV2").attr("T", ty(DType::F32));
        let vector = Tensor::from_slice::<f32>([1], &[7.]).unwrap();
        assert_eq!(
            msg(&v2, &[six(), pads32(&[[1, 0], [0, 1]]), vector]),
            "constant_values must be a scalar. Found: [1]"
        );
        let reflect = mirror_node(DType::F32, "REFLECT");
        let symmetric = mirror_node(DType::F32, "SYMMETRIC");
        assert_eq!(
            msg(&reflect, &[six(), pads32(&[[2, 1], [0, 0]])]),
            "paddings must be less than the dimension size: 2, 1 not less than 2"
        );
        assert_eq!(
            msg(&symmetric, &[six(), pads32(&[[3, 1], [0, 0]])]),
            "paddings must be no greater than the dimension size: 3, 1 greater than 2"
        );
        assert_eq!(
            msg(&symmetric, &[six(), pads32(&[[0, 0], [0, 4]])]),
            "paddings must be no greater than the dimension size: 0, 4 greater than 3"
        );
        // REFLECT of an empty dimension fails even without padding, as in TensorFlow.
        assert_eq!(
            msg(&reflect, &[Tensor::zeros(DType::F32, [0, 2]).unwrap(), pads32(&[[0, 0], [1, 1]])]),
            "paddings must be less than the dimension size: 0, 0 not less than 0"
        );
        assert_eq!(msg(&reflect, &[six(), pads32(&[[0, 0], [0, -1]])]), "paddings must be non-negative: 0 -1");
        assert_eq!(
            msg(&reflect, &[six(), pads32(&[[0, 0]])]),
            "The first dimension of paddings must be the rank of inputs[1,2], [2,3]"
        );
        let bad_mode = mirror_node(DType::F32, "EDGE");
        assert!(msg(&bad_mode, &[]).contains("Value for attr 'mode' of \"EDGE\""));
        let float_pads = Tensor::from_slice::<f32>([2, 2], &[0.; 4]).unwrap();
        assert!(msg(&p, &[six(), float_pads]).contains("int32 or int64"));
        for huge in [[[0, 0], [i64::MAX, 1]], [[i64::MAX / 2, 0], [0, 0]]] {
            assert!(msg(&p, &[six(), pads64(&huge)]).contains("overflows"), "{huge:?}");
        }
    }
}
