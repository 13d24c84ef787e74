//! Ops that move elements along one axis by a per-tensor or per-row
//! amount: `Roll` (`tf.roll`) and `ReverseSequence` (`tf.reverse_sequence`,
//! how a bidirectional RNN over padded sequences reverses each one).
//!
//! Owns: these kernels. They move fixed-width elements as bytes (Roll a
//! contiguous run at a time), so one path serves every dtype. Must not hold
//! state beyond parsed attributes.

use super::super::registry::OpDef;
use super::super::{
    FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType, attr_index_type_or, index_values,
};
use crate::bail;
use crate::error::{Result, Status};
use crate::graph::spec::NodeSpec;
use crate::tensor::{DType, Shape, Tensor};

pub const DEFS: &[OpDef] = &[
    OpDef::kernel("Roll", roll_signature, build_roll),
    OpDef::kernel("ReverseSequence", reverse_sequence_signature, build_reverse_sequence),
];

fn roll_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let shift = ValueType::Tensor(attr_index_type_or(node, "Tshift", DType::I32)?);
    let axis = ValueType::Tensor(attr_index_type_or(node, "Taxis", DType::I32)?);
    Ok(OpSignature::new(vec![t, shift, axis], vec![t]))
}

fn build_roll(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[0]);
        return crate::ops::array::string_moves::build(init, "T", carriers, build_roll);
    }
    Ok(FnKernel::boxed(roll))
}

fn roll(ctx: &mut OpContext<'_>) -> Result<()> {
    let x = ctx.input(0)?;
    let (shift_t, axis_t) = (ctx.input(1)?, ctx.input(2)?);
    if shift_t.shape().rank() > 1 || shift_t.shape() != axis_t.shape() {
        bail!(
            invalid_argument,
            "shift and axis must be scalars or vectors of the same size, got shapes {} and {}",
            shift_t.shape(),
            axis_t.shape()
        );
    }
    let dims = x.dims().to_vec();
    let rank = dims.len() as i64;
    // Shifts on one axis add up; each is taken modulo the axis' size.
    let mut shifts = vec![0usize; dims.len()];
    for (&shift, &axis) in index_values(shift_t, "shift")?.iter().zip(index_values(axis_t, "axis")?.iter()) {
        let a = if axis < 0 { axis + rank } else { axis };
        if a < 0 || a >= rank {
            bail!(invalid_argument, "axis {axis} is out of range [{}, {rank})", -rank);
        }
        let a = a as usize;
        if dims[a] > 0 {
            let size = dims[a] as i64;
            shifts[a] = ((shifts[a] as i64 + shift.rem_euclid(size)) % size) as usize;
        }
    }
    let size = super::element_size(x, "Roll")?;
    let src = x.as_bytes();
    let mut out = vec![0u8; src.len()];
    if !src.is_empty() {
        // The trailing axes not shifted form runs copied whole.
        let kept = shifts.iter().rev().take_while(|&&s| s == 0).count();
        let outer = &dims[..dims.len() - kept];
        let run = dims[dims.len() - kept..].iter().product::<usize>() * size;
        let strides = Shape::new(outer).strides();
        let mut index = vec![0usize; outer.len()];
        for r in 0..outer.iter().product::<usize>() {
            let mut rest = r;
            for (axis, &d) in outer.iter().enumerate().rev() {
                index[axis] = rest % d;
                rest /= d;
            }
            // Output position i holds input position i - shift.
            let from: usize = index
                .iter()
                .zip(outer)
                .zip(&shifts)
                .zip(strides.iter())
                .map(|(((&i, &d), &s), &stride)| ((i + d - s) % d) * stride)
                .sum();
            out[r * run..][..run].copy_from_slice(&src[from * run..][..run]);
        }
    }
    let t = Tensor::from_bytes(x.dtype(), x.shape().clone(), &out)?;
    ctx.set_output(0, t);
    Ok(())
}

fn reverse_sequence_signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    let lengths = ValueType::Tensor(attr_index_type_or(node, "Tlen", DType::I64)?);
    Ok(OpSignature::new(vec![t, lengths], vec![t]))
}

struct ReverseSequence {
    seq_dim: i64,
    batch_dim: i64,
}

fn build_reverse_sequence(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    if crate::ops::array::string_moves::moves_strings(init, "T") {
        let carriers = crate::ops::array::string_moves::Carriers::Inputs(&[0]);
        return crate::ops::array::string_moves::build(init, "T", carriers, build_reverse_sequence);
    }
    let seq_dim = init.node.attr_int("seq_dim")?;
    let batch_dim = init.node.attr_int_or("batch_dim", 0)?;
    Ok(Box::new(ReverseSequence { seq_dim, batch_dim }))
}

impl OpKernel for ReverseSequence {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        let dims = x.dims();
        let rank = dims.len() as i64;
        let (seq_dim, batch_dim) = (self.seq_dim, self.batch_dim);
        if seq_dim == batch_dim || !(0..rank).contains(&seq_dim) || !(0..rank).contains(&batch_dim) {
            bail!(
                invalid_argument,
                "seq_dim ({seq_dim}) and batch_dim ({batch_dim}) must be different axes of the rank {rank} input"
            );
        }
        let (seq_dim, batch_dim) = (seq_dim as usize, batch_dim as usize);
        let lengths_t = ctx.input(1)?;
        if lengths_t.dims() != [dims[batch_dim]] {
            bail!(
                invalid_argument,
                "seq_lengths must be a vector of length input.dims(batch_dim) = {}, got shape {}",
                dims[batch_dim],
                lengths_t.shape()
            );
        }
        let lengths: Vec<usize> = index_values(lengths_t, "seq_lengths")?
            .iter()
            .enumerate()
            .map(|(b, &len)| match usize::try_from(len) {
                Ok(len) if len <= dims[seq_dim] => Ok(len),
                _ => Err(Status::invalid_argument(format!(
                    "seq_lengths[{b}] = {len} is not in [0, input.dims(seq_dim) = {}]",
                    dims[seq_dim]
                ))),
            })
            .collect::<Result<_>>()?;
        let size = super::element_size(x, "ReverseSequence")?;
        let src = x.as_bytes();
        let mut out = vec![0u8; src.len()];
        let strides = x.shape().strides();
        let mut index = vec![0usize; dims.len()];
        for flat in 0..x.num_elements() {
            let mut rest = flat;
            for (axis, &d) in dims.iter().enumerate().rev() {
                index[axis] = rest % d;
                rest /= d;
            }
            let (s, len) = (index[seq_dim], lengths[index[batch_dim]]);
            let from = if s < len { flat + (len - 1 - s) * strides[seq_dim] - s * strides[seq_dim] } else { flat };
            out[flat * size..][..size].copy_from_slice(&src[from * size..][..size]);
        }
        let t = Tensor::from_bytes(x.dtype(), x.shape().clone(), &out)?;
        ctx.set_output(0, t);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::spec::AttrValue;
    use crate::ops::testing::{node, run1, ty};

    fn ints(dims: &[usize], v: &[i32]) -> Tensor {
        Tensor::from_slice::<i32>(dims, v).unwrap()
    }

    #[test]
    fn roll_shifts_each_axis_and_adds_repeated_axes() {
        let roll = node("Roll").attr("T", ty(DType::I32));
        let x = ints(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        let out = run1(&roll, &[x.clone(), Tensor::scalar(1i32), Tensor::scalar(1i32)]).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), &[3, 1, 2, 6, 4, 5]);
        let out = run1(&roll, &[x.clone(), ints(&[2], &[1, -4]), ints(&[2], &[0, -1])]).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), &[5, 6, 4, 2, 3, 1]);
        let twice = run1(&roll, &[x.clone(), ints(&[2], &[1, 1]), ints(&[2], &[1, 1])]).unwrap();
        assert_eq!(twice.as_slice::<i32>().unwrap(), &[2, 3, 1, 5, 6, 4]);
        let err = run1(&roll, &[x, Tensor::scalar(1i32), Tensor::scalar(2i32)]).unwrap_err();
        assert!(err.message.contains("axis 2 is out of range"), "{err}");
    }

    #[test]
    fn reverse_sequence_reverses_each_prefix() {
        let op = node("ReverseSequence")
            .attr("T", ty(DType::I32))
            .attr("Tlen", ty(DType::I32))
            .attr("seq_dim", AttrValue::Int(1))
            .attr("batch_dim", AttrValue::Int(0));
        let x = ints(&[2, 4], &[1, 2, 3, 4, 5, 6, 7, 8]);
        let out = run1(&op, &[x.clone(), ints(&[2], &[3, 0])]).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), &[3, 2, 1, 4, 5, 6, 7, 8]);
        let err = run1(&op, &[x.clone(), ints(&[2], &[5, 1])]).unwrap_err();
        assert!(err.message.contains("seq_lengths[0] = 5"), "{err}");
        assert!(run1(&op, &[x, ints(&[3], &[1, 1, 1])]).is_err());
    }
}
