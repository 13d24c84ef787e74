//! `Diag` and `DiagPart` (`tf.linalg.tensor_diag`,
//! `tf.linalg.tensor_diag_part`): a tensor of shape `s` spread on the
//! diagonal of a zero tensor of shape `s + s`, and back. Elements move as
//! bytes, so every fixed-width dtype works.
//!
//! Owns: these kernels. Must not hold state.

use super::element_size;
use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{FnKernel, KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::tensor::{Shape, Tensor};

pub const DEFS: &[OpDef] =
    &[OpDef::kernel("Diag", signature, build_diag), OpDef::kernel("DiagPart", signature, build_diag_part)];

/// `[T] -> [T]`.
fn signature(node: &NodeSpec) -> Result<OpSignature> {
    let t = ValueType::Tensor(node.attr_dtype("T")?);
    Ok(OpSignature::new(vec![t], vec![t]))
}

fn build_diag(_: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(diag))
}

fn build_diag_part(_: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(FnKernel::boxed(diag_part))
}

fn diag(ctx: &mut OpContext<'_>) -> Result<()> {
    let input = ctx.input(0)?;
    if input.rank() == 0 {
        bail!(invalid_argument, "Input must be at least rank 1, got 0");
    }
    let width = element_size(input, "Diag")?;
    let n = input.num_elements();
    let mut bytes = vec![0u8; n * n * width];
    for (i, element) in input.as_bytes().chunks_exact(width).enumerate() {
        let at = (i * n + i) * width;
        bytes[at..at + width].copy_from_slice(element);
    }
    let mut dims = input.dims().to_vec();
    dims.extend_from_slice(input.dims());
    ctx.set_output(0, Tensor::from_bytes(input.dtype(), Shape::from_vec(dims), &bytes)?);
    Ok(())
}

fn diag_part(ctx: &mut OpContext<'_>) -> Result<()> {
    let input = ctx.input(0)?;
    let rank = input.rank();
    if rank == 0 || rank % 2 != 0 {
        bail!(invalid_argument, "The rank of the tensor should be even and positive, got shape {}", input.shape());
    }
    let (half, rest) = input.dims().split_at(rank / 2);
    if half != rest {
        bail!(
            invalid_argument,
            "Invalid shape {}: dimensions [0, {}) and [{}, {rank}) must match",
            input.shape(),
            rank / 2,
            rank / 2
        );
    }
    let width = element_size(input, "DiagPart")?;
    let n: usize = half.iter().product();
    let source = input.as_bytes();
    let mut bytes = Vec::with_capacity(n * width);
    for i in 0..n {
        let at = (i * n + i) * width;
        bytes.extend_from_slice(&source[at..at + width]);
    }
    ctx.set_output(0, Tensor::from_bytes(input.dtype(), Shape::from_vec(half.to_vec()), &bytes)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ops::testing::{node, run1, ty};
    use crate::tensor::{DType, Tensor};

    #[test]
    fn diag_and_diag_part_match_tensorflow() {
        let op = |name: &str| node(name).attr("T", ty(DType::I32));
        let d = run1(&op("Diag"), &[Tensor::from_slice::<i32>([2, 2].as_slice(), &[1, 2, 3, 4]).unwrap()]).unwrap();
        assert_eq!(d.dims(), [2, 2, 2, 2]);
        assert_eq!(d.as_slice::<i32>().unwrap(), [1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 4]);
        let input = Tensor::from_slice::<i32>([2, 2, 2, 2].as_slice(), &(0..16).collect::<Vec<_>>()).unwrap();
        let p = run1(&op("DiagPart"), &[input]).unwrap();
        assert_eq!(p.as_slice::<i32>().unwrap(), [0, 5, 10, 15]);
        let bad = Tensor::from_slice::<i32>([2, 3].as_slice(), &[0; 6]).unwrap();
        assert!(run1(&op("DiagPart"), &[bad]).unwrap_err().message.contains("must match"));
    }
}
