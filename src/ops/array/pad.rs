//! Padding: `Pad` (zeros), `PadV2` (a given constant) and `MirrorPad`
//! (`REFLECT` leaves the edge out of the mirror, `SYMMETRIC` keeps it).
//!
//! Owns: these kernels. They map each output position to an input
//! position (or the pad value) axis by axis, copying the innermost axis a
//! run at a time, on bytes, so one path serves every fixed-width dtype.
//! Must not hold state beyond parsed attributes.

use super::super::registry::OpDef;
use super::super::{FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, index_values};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Shape, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Pad", pad_signature::<2>, build_pad),
    OpDef::kernel("PadV2", pad_signature::<3>, build_pad),
    OpDef::kernel("MirrorPad", pad_signature::<2>, build_mirror_pad),
];

fn pad_signature<const INPUTS: usize>(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let paddings = ValueType::Tensor(node.attr_dtype_or("Tpaddings", DType::I32)?);
    let inputs = if INPUTS == 3 { vec![t, paddings, t] } else { vec![t, paddings] };
    Ok(OpSignature::new(inputs, vec![t]))
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Constant,
    Reflect,
    Symmetric,
}

fn build_pad(_init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(|ctx| pad(ctx, Mode::Constant)))
}

fn build_mirror_pad(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    let mode = init.node.attr_str_or("mode", "")?;
    Ok(match mode.as_str() {
        "REFLECT" => FnKernel::boxed(|ctx| pad(ctx, Mode::Reflect)),
        "SYMMETRIC" => FnKernel::boxed(|ctx| pad(ctx, Mode::Symmetric)),
        other => bail!(invalid_argument, "mode must be either REFLECT or SYMMETRIC, got '{other}'"),
    })
}

/// Where output position `i` of an axis of size `dim` padded by `before`
/// reads from, or `None` for the pad value.
fn source(i: usize, before: usize, dim: usize, mode: Mode) -> Option<usize> {
    let at = i as i64 - before as i64;
    let d = dim as i64;
    let from = match mode {
        _ if (0..d).contains(&at) => at,
        Mode::Constant => return None,
        Mode::Reflect if at < 0 => -at,
        Mode::Reflect => 2 * (d - 1) - at,
        Mode::Symmetric if at < 0 => -at - 1,
        Mode::Symmetric => 2 * d - 1 - at,
    };
    Some(from as usize)
}

fn pad(ctx: &mut OpContext<'_>, mode: Mode) -> Result<()> {
    let x = ctx.input(0)?;
    let dims = x.dims().to_vec();
    let rank = dims.len();
    let paddings = ctx.input(1)?;
    if paddings.dims() != [rank, 2] {
        bail!(
            invalid_argument,
            "The first dimension of paddings must be the rank of inputs[{rank},2], got {:?}",
            paddings.dims()
        );
    }
    let flat = index_values(paddings, "paddings")?;
    let mut pads = Vec::with_capacity(rank);
    for (axis, p) in flat.chunks(2).enumerate() {
        let (Ok(before), Ok(after)) = (usize::try_from(p[0]), usize::try_from(p[1])) else {
            bail!(invalid_argument, "Paddings must be non-negative: {} {}", p[0], p[1]);
        };
        let limit = match mode {
            Mode::Constant => usize::MAX,
            Mode::Reflect => dims[axis].saturating_sub(1),
            Mode::Symmetric => dims[axis],
        };
        if before > limit || after > limit {
            bail!(
                invalid_argument,
                "paddings must be no greater than the dimension size: {before}, {after} greater than {}",
                limit
            );
        }
        pads.push([before, after]);
    }
    let size = x
        .dtype()
        .size()
        .ok_or_else(|| Status::invalid_argument(format!("{} tensors cannot be padded here", x.dtype())))?;
    let fill: Vec<u8> = if ctx.num_inputs() == 3 {
        let c = ctx.input(2)?;
        if c.num_elements() != 1 {
            bail!(invalid_argument, "constant_values must be a scalar. Got shape {:?}", c.dims());
        }
        c.as_bytes().to_vec()
    } else {
        vec![0; size]
    };
    let out_dims: Vec<usize> = dims.iter().zip(&pads).map(|(&d, p)| d + p[0] + p[1]).collect();
    let count: usize = out_dims.iter().product();
    let src = x.as_bytes();
    let mut out = vec![0u8; count * size];
    if count > 0 && rank == 0 {
        out.copy_from_slice(src);
    } else if count > 0 {
        let (inner_out, inner_in) = (out_dims[rank - 1], dims[rank - 1]);
        let in_strides = Shape::new(&dims).strides();
        let rows = count / inner_out;
        let mut index = vec![0usize; rank - 1];
        for row in 0..rows {
            let mut r = row;
            for axis in (0..rank - 1).rev() {
                index[axis] = r % out_dims[axis];
                r /= out_dims[axis];
            }
            let mut base = Some(0usize);
            for axis in 0..rank - 1 {
                base = match (base, source(index[axis], pads[axis][0], dims[axis], mode)) {
                    (Some(b), Some(s)) => Some(b + s * in_strides[axis]),
                    _ => None,
                };
            }
            let dst = &mut out[row * inner_out * size..][..inner_out * size];
            let [before, _] = pads[rank - 1];
            match base {
                Some(b) if mode == Mode::Constant => {
                    for (i, chunk) in dst.chunks_mut(size).enumerate() {
                        if i < before || i >= before + inner_in {
                            chunk.copy_from_slice(&fill);
                        }
                    }
                    dst[before * size..][..inner_in * size].copy_from_slice(&src[b * size..][..inner_in * size]);
                }
                Some(b) => {
                    for (i, chunk) in dst.chunks_mut(size).enumerate() {
                        let s = source(i, before, inner_in, mode).unwrap_or(0);
                        chunk.copy_from_slice(&src[(b + s) * size..][..size]);
                    }
                }
                None => dst.chunks_mut(size).for_each(|c| c.copy_from_slice(&fill)),
            }
        }
    }
    let t = Tensor::from_bytes(x.dtype(), Shape::from_vec(out_dims), &out)?;
    ctx.set_output(0, t);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};

    fn x23() -> Tensor {
        Tensor::from_slice::<f32>([2, 3], &[1., 2., 3., 4., 5., 6.]).unwrap()
    }

    fn pads(v: &[i32]) -> Tensor {
        Tensor::from_slice::<i32>([v.len() / 2, 2], v).unwrap()
    }

    #[test]
    fn constant_padding_with_zeros_and_a_value() {
        let p = run1(&node("Pad").attr("T", ty(DType::F32)), &[x23(), pads(&[1, 0, 0, 2])]).unwrap();
        assert_eq!(p.dims(), &[3, 5]);
        assert_eq!(p.as_slice::<f32>().unwrap(), &[0., 0., 0., 0., 0., 1., 2., 3., 0., 0., 4., 5., 6., 0., 0.]);
        let n = node("PadV2").attr("T", ty(DType::F32));
        let p = run1(&n, &[x23(), pads(&[0, 0, 1, 1]), Tensor::scalar(-1.0f32)]).unwrap();
        assert_eq!(p.as_slice::<f32>().unwrap(), &[-1., 1., 2., 3., -1., -1., 4., 5., 6., -1.]);
        let ints = Tensor::from_slice::<i64>([2], &[7, 8]).unwrap();
        let p = run1(&node("Pad").attr("T", ty(DType::I64)), &[ints, pads(&[2, 1])]).unwrap();
        assert_eq!(p.as_slice::<i64>().unwrap(), &[0, 0, 7, 8, 0]);
    }

    #[test]
    fn mirror_padding_reflects_and_symmetrises() {
        // tf.pad(x, [[1, 1], [2, 2]], mode=...) on [[1,2,3],[4,5,6]].
        let reflect = node("MirrorPad").attr("T", ty(DType::F32)).attr("mode", AttrValue::Bytes(b"REFLECT".to_vec()));
        let p = run1(&reflect, &[x23(), pads(&[1, 1, 2, 2])]).unwrap();
        assert_eq!(p.dims(), &[4, 7]);
        assert_eq!(
            p.as_slice::<f32>().unwrap(),
            &[
                6., 5., 4., 5., 6., 5., 4., 3., 2., 1., 2., 3., 2., 1., 6., 5., 4., 5., 6., 5., 4., 3., 2., 1., 2., 3.,
                2., 1.
            ]
        );
        let symmetric =
            node("MirrorPad").attr("T", ty(DType::F32)).attr("mode", AttrValue::Bytes(b"SYMMETRIC".to_vec()));
        let p = run1(&symmetric, &[x23(), pads(&[1, 1, 2, 2])]).unwrap();
        assert_eq!(
            p.as_slice::<f32>().unwrap(),
            &[
                2., 1., 1., 2., 3., 3., 2., 2., 1., 1., 2., 3., 3., 2., 5., 4., 4., 5., 6., 6., 5., 5., 4., 4., 5., 6.,
                6., 5.
            ]
        );
        let err = run1(&reflect, &[x23(), pads(&[2, 0, 0, 0])]).unwrap_err();
        assert!(err.message.contains("no greater than the dimension size"), "{err}");
    }

    #[test]
    fn bad_paddings_are_errors() {
        let n = node("Pad").attr("T", ty(DType::F32));
        assert!(run1(&n, &[x23(), pads(&[1, 1])]).unwrap_err().message.contains("rank of inputs"));
        assert!(run1(&n, &[x23(), pads(&[-1, 0, 0, 0])]).unwrap_err().message.contains("non-negative"));
        let bad_mode = node("MirrorPad").attr("T", ty(DType::F32)).attr("mode", AttrValue::Bytes(b"WRAP".to_vec()));
        assert!(run1(&bad_mode, &[x23(), pads(&[0, 0, 0, 0])]).is_err());
    }
}
