//! `Bitcast` (`tf.bitcast`): the same bytes read as another dtype. A wider
//! source gains an innermost dimension (its width over the target's), a
//! narrower one loses its innermost dimension, which must be that ratio.
//!
//! Owns: this kernel. Must not hold state beyond the parsed target type.

use crate::bail;
use crate::error::Result;
use crate::graph::spec::NodeSpec;
use crate::ops::registry::OpDef;
use crate::ops::{KernelInit, OpContext, OpKernel, OpSignature, ValueType};
use crate::tensor::{DType, Shape, Tensor};

pub const DEFS: &[OpDef] = &[OpDef::kernel("Bitcast", signature, build)];

/// `[T] -> [type]`.
fn signature(node: &NodeSpec) -> Result<OpSignature> {
    Ok(OpSignature::new(
        vec![ValueType::Tensor(node.attr_dtype("T")?)],
        vec![ValueType::Tensor(node.attr_dtype("type")?)],
    ))
}

struct Bitcast {
    to: DType,
}

fn numeric_width(dtype: DType, node: &NodeSpec) -> Result<usize> {
    match dtype {
        DType::Bool | DType::String => {
            bail!(invalid_argument, "node '{}' (Bitcast): dtype {dtype} cannot be bitcast", node.name)
        }
        _ => dtype
            .size()
            .ok_or_else(|| crate::error::Status::invalid_argument(format!("Bitcast does not support {dtype}"))),
    }
}

fn build(init: &KernelInit<'_>) -> Result<Box<dyn OpKernel>> {
    numeric_width(init.node.attr_dtype("T")?, init.node)?;
    let to = init.node.attr_dtype("type")?;
    numeric_width(to, init.node)?;
    Ok(Box::new(Bitcast { to }))
}

impl OpKernel for Bitcast {
    fn compute(&self, ctx: &mut OpContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let (from_width, to_width) = (input.dtype().size().unwrap_or(0), self.to.size().unwrap_or(0));
        let mut dims = input.dims().to_vec();
        if from_width > to_width {
            dims.push(from_width / to_width);
        } else if from_width < to_width {
            if dims.last().copied() != Some(to_width / from_width) {
                bail!(
                    invalid_argument,
                    "Cannot bitcast from {} to {}: the innermost dimension of shape {} must be {}",
                    input.dtype(),
                    self.to,
                    input.shape(),
                    to_width / from_width
                );
            }
            dims.pop();
        }
        let out = Tensor::from_bytes(self.to, Shape::from_vec(dims), input.as_bytes())?;
        ctx.set_output(0, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::testing::{node, run1, ty};
    use crate::tensor::{DType, Tensor};

    fn cast(from: DType, to: DType, input: Tensor) -> crate::error::Result<Tensor> {
        run1(&node("Bitcast").attr("T", ty(from)).attr("type", ty(to)), &[input])
    }

    #[test]
    fn widths_reshape_as_tensorflow_does() {
        let f = Tensor::from_slice::<f32>([2].as_slice(), &[1., 2.]).unwrap();
        assert_eq!(
            cast(DType::F32, DType::I32, f.clone()).unwrap().as_slice::<i32>().unwrap(),
            [1065353216, 1073741824]
        );
        let bytes = cast(DType::F32, DType::U8, f).unwrap();
        assert_eq!(bytes.dims(), [2, 4]);
        assert_eq!(bytes.as_slice::<u8>().unwrap(), [0, 0, 128, 63, 0, 0, 0, 64]);
        let pairs = Tensor::from_slice::<i32>([2, 2].as_slice(), &[1, 2, 3, 4]).unwrap();
        assert_eq!(cast(DType::I32, DType::I64, pairs).unwrap().as_slice::<i64>().unwrap(), [8589934593, 17179869187]);
        let odd = Tensor::from_slice::<i32>([3].as_slice(), &[1, 2, 3]).unwrap();
        assert!(cast(DType::I32, DType::I64, odd).unwrap_err().message.contains("Cannot bitcast"));
    }
}
